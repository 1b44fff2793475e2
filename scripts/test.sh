#!/usr/bin/env bash
# Sets up and runs every test: installs what is needed, starts a throwaway embedded PostgreSQL,
# runs fmt/clippy and the test suites against it, and stops it again (even on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export MESH_DATA_DIR="${MESH_TEST_DATA_DIR:-$CARGO_TARGET_DIR/mesh-test-pg}"
BIN="$CARGO_TARGET_DIR/debug/mesh-memory"

echo "== build"
cargo build --all-targets --locked

echo "== start throwaway PostgreSQL in $MESH_DATA_DIR"
rm -rf "$MESH_DATA_DIR"
"$BIN" db start --ephemeral
trap '"$BIN" db stop >/dev/null 2>&1 || true' EXIT
DATABASE_URL="$("$BIN" db url)"
export DATABASE_URL

echo "== lint"
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings

echo "== tests"
cargo test --locked --all-targets -- --test-threads="${TEST_THREADS:-4}"
