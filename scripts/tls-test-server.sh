#!/usr/bin/env bash
# A PostgreSQL that requires TLS, for tests (never for production):
#
#   scripts/tls-test-server.sh start DIR   # prints KEY='value' lines (eval them)
#   scripts/tls-test-server.sh stop DIR    # stops everything start started
#
# The embedded PostgreSQL (the project's wheel: pgvector, which the schema needs, but no SSL) is
# started under DIR/pg, migrated, seeded with the demo workspace, and given an auditor login role
# (`mesh-memory role create`). TLS is terminated in front of it by examples/pg_tls_proxy.rs on
# 127.0.0.1, with a server certificate for the DNS name `localhost` only, signed by a test CA made
# here with openssl; a plaintext client gets the "no pg_hba.conf entry ... no encryption" refusal
# a PostgreSQL with only hostssl lines sends. A second proxy plays a server without TLS. A second,
# unrelated CA is made for "certificate not trusted" tests.
#
# Printed: MESH_TLS_PORT, MESH_PLAIN_PORT, MESH_TLS_HOST, MESH_TLS_CA, MESH_TLS_WRONG_CA,
# MESH_TLS_DATABASE, MESH_TLS_AUDITOR, MESH_TLS_AUDITOR_PASSWORD, MESH_TLS_ADMIN_URL (verify-full
# on localhost, as the cluster's superuser).
#
# Binaries: MESH_BIN (default $CARGO_TARGET_DIR/debug/mesh-memory) and MESH_TLS_PROXY (default
# $CARGO_TARGET_DIR/debug/examples/pg_tls_proxy; `cargo build --example pg_tls_proxy`).
# DIR must be a short path (a unix socket's path stays under 108 bytes) that, run as root, the
# cluster's user (postgres) can reach: DIR is made 755.
set -Eeuo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action="$1"
dir="$2"
case "$dir" in
  *[!A-Za-z0-9._/-]*) echo "$0: DIR may hold only letters, digits and . _ / -" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
BIN="${MESH_BIN:-$target/debug/mesh-memory}"
PROXY="${MESH_TLS_PROXY:-$target/debug/examples/pg_tls_proxy}"
AUDITOR="tls_auditor"

# Runs the CLI on the cluster under DIR/pg (never on a DATABASE_URL the caller has set).
mesh() { env -u DATABASE_URL MESH_DATA_DIR="$dir/pg" "$BIN" "$@"; }

stop() {
  for pid_file in "$dir"/proxy-*.pid; do
    [ -f "$pid_file" ] || continue
    pid="$(cat "$pid_file")"
    # Only a process that is still this proxy (a pid may have been reused since).
    if grep -q pg_tls_proxy "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
    rm -f "$pid_file"
  done
  local pid_file="$dir/pg/pgdata/postmaster.pid"
  if [ -f "$pid_file" ]; then
    mesh db stop >&2 || echo "$0: mesh-memory db stop failed; stopping the server by its pid" >&2
  fi
  # Without a working mesh-memory (a wrong MESH_BIN), PostgreSQL's own fast shutdown (SIGINT).
  if [ -f "$pid_file" ]; then
    local pid
    pid="$(head -n 1 "$pid_file")"
    if grep -q "$dir/pg/pgdata" "/proc/$pid/cmdline" 2>/dev/null; then
      kill -INT "$pid"
      for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
  fi
}

# A CA certificate and key: DIR/NAME.pem, DIR/NAME.key.
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$2" -keyout "$dir/$1.key" -out "$dir/$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# The server certificate: DNS name localhost only (so 127.0.0.1 does not match it).
make_server_certificate() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr"
  printf '%s\n' "subjectAltName=DNS:localhost" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" > "$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 2 -extfile "$dir/server.ext" -out "$dir/server.pem"
}

# Starts a proxy (NAME, then its arguments) in the background; prints the port it listens on.
start_proxy() {
  local name="$1"; shift
  "$PROXY" "$@" > "$dir/proxy-$name.out" 2> "$dir/proxy-$name.log" < /dev/null &
  echo $! > "$dir/proxy-$name.pid"
  for _ in $(seq 100); do
    if grep -q '^listening on ' "$dir/proxy-$name.out" 2>/dev/null; then
      sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/proxy-$name.out"
      return
    fi
    sleep 0.1
  done
  echo "$0: the $name proxy did not start:" >&2
  cat "$dir/proxy-$name.log" >&2
  return 1
}

start() {
  [ -x "$BIN" ] || { echo "$0: no mesh-memory at $BIN (cargo build, or set MESH_BIN)" >&2; exit 1; }
  [ -x "$PROXY" ] || { echo "$0: no proxy at $PROXY (cargo build --example pg_tls_proxy, or set MESH_TLS_PROXY)" >&2; exit 1; }
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  chmod 755 "$dir"
  local log="$dir/setup.log"
  trap 'echo "$0: start failed; its log:" >&2; cat "$log" >&2; stop' ERR
  {
    make_ca ca "Mesh Memory test CA"
    make_ca wrong-ca "Unrelated test CA"
    make_server_certificate
    # `db start` migrates the cluster's default database.
    mesh db start --ephemeral
    local admin_url
    admin_url="$(mesh db url)"
    DATABASE_URL="$admin_url" "$BIN" demo seed
    auditor_password="$(openssl rand -hex 16)"
    MESH_NEW_ROLE_PASSWORD="$auditor_password" DATABASE_URL="$admin_url" "$BIN" role create "$AUDITOR" --kind auditor
  } > "$log" 2>&1
  admin_url="$(mesh db url)"
  # postgres://USER:PASSWORD@localhost:PORT/DATABASE?host=SOCKET_DIR
  local credentials port database socket_dir
  credentials="$(printf '%s' "$admin_url" | sed -n 's|^postgres://\([^@]*\)@.*|\1|p')"
  port="$(printf '%s' "$admin_url" | sed -n 's|^postgres://[^@]*@[^:/]*:\([0-9]*\)/.*|\1|p')"
  database="$(printf '%s' "$admin_url" | sed -n 's|^postgres://[^/]*/\([^?]*\).*|\1|p')"
  socket_dir="$(printf '%s' "$admin_url" | sed -n 's|.*[?&]host=\([^&]*\).*|\1|p')"
  local socket="$socket_dir/.s.PGSQL.${port:-5432}"
  local tls_port plain_port
  tls_port="$(start_proxy tls --upstream "$socket" --cert "$dir/server.pem" --key "$dir/server.key")"
  plain_port="$(start_proxy plain --upstream "$socket" --no-tls)"
  trap - ERR
  cat <<EOF
MESH_TLS_PORT='$tls_port'
MESH_PLAIN_PORT='$plain_port'
MESH_TLS_HOST='localhost'
MESH_TLS_CA='$dir/ca.pem'
MESH_TLS_WRONG_CA='$dir/wrong-ca.pem'
MESH_TLS_DATABASE='$database'
MESH_TLS_AUDITOR='$AUDITOR'
MESH_TLS_AUDITOR_PASSWORD='$auditor_password'
MESH_TLS_ADMIN_URL='postgres://$credentials@localhost:$tls_port/$database?sslmode=verify-full&sslrootcert=$dir/ca.pem'
EOF
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
