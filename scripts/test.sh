#!/usr/bin/env bash
# Sets up and runs every test: installs what is needed, starts a throwaway embedded PostgreSQL,
# runs fmt, clippy and every suite against it (core, the feature-gated semantic and benchmark
# suites, the operator console with its real-window end-to-end suite), and stops PostgreSQL again,
# even on failure.
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

step "start a throwaway PostgreSQL in $MESH_DATA_DIR"
"$BIN" db stop >/dev/null 2>&1 || true
rm -rf "$MESH_DATA_DIR"
"$BIN" db start --ephemeral
trap '"$BIN" db stop >/dev/null 2>&1 || true' EXIT
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
# Runs against a real Qdrant only when QDRANT_URL is set; otherwise it prints a SKIPPED banner.
cargo test --locked --features qdrant --test semantic_qdrant -- --nocapture

"$BIN" db stop >/dev/null 2>&1 || true
trap - EXIT

step "operator console"
scripts/test-console.sh
step "all suites passed"
