#!/usr/bin/env bash
# Sets up and runs every test: installs what is needed, starts a throwaway embedded PostgreSQL
# (and, for the Qdrant suites, a throwaway Qdrant from ../shared/tools/qdrant), runs fmt, clippy and
# every suite against them (core, the feature-gated semantic and benchmark suites, the operator
# console with its real-window end-to-end suite, the Debian package installed and driven), and
# stops every server it started, even on failure. Tests copy their databases from one migrated template and drop them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export MESH_DATA_DIR="${MESH_TEST_DATA_DIR:-$CARGO_TARGET_DIR/mesh-test-pg}"
BIN="$CARGO_TARGET_DIR/debug/mesh-memory"
started=$(date +%s)
step() { echo; echo "== $1 ($(( $(date +%s) - started ))s)"; }

step "build"
cargo build --all-targets --locked

# Every server this run starts lives under these directories, and stop_servers stops each one
# however the run ends: the shared test cluster, a test's private cluster (tests make them under
# TMPDIR) and the console's.
# (A short path: a Unix socket's path must stay under 108 bytes.)
RUN_DIR="$(mktemp -d /tmp/mesh-test-run.XXXXXX)"
stop_servers() {
  # A cluster's directory holds pgdata/postmaster.pid while its server runs.
  # (A directory already removed is not an error: this also runs from the EXIT trap after cleanup.)
  { find "$RUN_DIR" "$MESH_DATA_DIR" "$CARGO_TARGET_DIR/console-e2e" "$CARGO_TARGET_DIR/package-e2e" \
      -path '*/pgdata/postmaster.pid' 2>/dev/null || true; } \
    | while read -r pid_file; do
        # (`db stop` refuses to run while DATABASE_URL names a server: it manages the embedded one.)
        env -u DATABASE_URL MESH_DATA_DIR="$(dirname "$(dirname "$pid_file")")" "$BIN" db stop >/dev/null 2>&1 || true
      done
}
trap stop_servers EXIT

step "start a throwaway PostgreSQL in $MESH_DATA_DIR"
stop_servers
rm -rf "$MESH_DATA_DIR"
mkdir -p "$RUN_DIR/tmp"
chmod 755 "$RUN_DIR" && chmod 1777 "$RUN_DIR/tmp"  # as root, a test cluster's server runs as another user
export TMPDIR="$RUN_DIR/tmp"
"$BIN" db start --ephemeral
DATABASE_URL="$("$BIN" db url)"
export DATABASE_URL

step "lint"
cargo fmt --all --check
cargo clippy --all-targets --locked -- -D warnings

step "core tests"
cargo test --locked --all-targets -- --test-threads="${TEST_THREADS:-4}" --skip leak_nothing
# Documentation tests: the compile-fail examples that keep privacy types unforgeable.
cargo test --locked --doc

step "adversarial privacy suite (prints its violation count)"
cargo test --locked --test adversarial -- --nocapture

step "local embedder: reference vectors, paraphrase retrieval, LoCoMo dev split and the 10k bench"
cargo clippy --locked --features local-embedder,qdrant --lib --bins \
  --test semantic_local --test semantic_qdrant --test benchmark_smoke -- -D warnings
cargo test --locked --features local-embedder --test semantic_local --test benchmark_smoke -- --nocapture

step "Qdrant: a throwaway server from ../shared/tools/qdrant, the adapter's suites against it"
# The server binary is verified and unpacked by the shared script (a missing one fails here, loudly).
MESH_QDRANT_BIN="$(../shared/tools/qdrant/unpack.sh)"
export MESH_QDRANT_BIN
export MESH_QDRANT_DIR="${MESH_TEST_QDRANT_DIR:-$CARGO_TARGET_DIR/mesh-test-qdrant}"
cargo build --locked --features qdrant --bin mesh-memory
"$BIN" qdrant stop >/dev/null 2>&1 || true
"$BIN" qdrant start
trap '"$BIN" qdrant stop >/dev/null 2>&1 || true; stop_servers' EXIT
# Conformance with pgvector, nothing resurrects, a stopped server, a three-node cluster (the last
# two start their own nodes from MESH_QDRANT_BIN).
QDRANT_URL="$("$BIN" qdrant url)" cargo test --locked --features qdrant --test semantic_qdrant -- --nocapture
"$BIN" qdrant stop
trap stop_servers EXIT

stop_servers

step "operator console"
scripts/test-console.sh
stop_servers

step "package: build the .deb, install it, sign in from the installed console over verify-full TLS"
scripts/test-package.sh
stop_servers
left="$(pgrep -af "postgres -D ($CARGO_TARGET_DIR|$RUN_DIR)" || true)"
[ -z "$left" ] || { echo "servers left running:"; echo "$left"; exit 1; }
trap - EXIT
rm -rf "$RUN_DIR"
step "all suites passed; no server left running"
