#!/usr/bin/env bash
# Sets up and runs every test: installs what is needed, starts a throwaway embedded PostgreSQL
# (and, for the Qdrant suites, a throwaway Qdrant from ../shared/tools/qdrant), runs fmt, clippy and
# every suite against them (core, the feature-gated semantic and benchmark suites, the operator
# console with its real-window end-to-end suite), and stops both again, even on failure.
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

step "Qdrant: a throwaway server from ../shared/tools/qdrant, the adapter's suites against it"
# The server binary is verified and unpacked by the shared script (a missing one fails here, loudly).
MESH_QDRANT_BIN="$(../shared/tools/qdrant/unpack.sh)"
export MESH_QDRANT_BIN
export MESH_QDRANT_DIR="${MESH_TEST_QDRANT_DIR:-$CARGO_TARGET_DIR/mesh-test-qdrant}"
cargo build --locked --features qdrant --bin mesh-memory
"$BIN" qdrant stop >/dev/null 2>&1 || true
"$BIN" qdrant start
trap '"$BIN" qdrant stop >/dev/null 2>&1 || true; "$BIN" db stop >/dev/null 2>&1 || true' EXIT
# Conformance with pgvector, nothing resurrects, a stopped server, a three-node cluster (the last
# two start their own nodes from MESH_QDRANT_BIN).
QDRANT_URL="$("$BIN" qdrant url)" cargo test --locked --features qdrant --test semantic_qdrant -- --nocapture
"$BIN" qdrant stop

"$BIN" db stop >/dev/null 2>&1 || true
trap - EXIT

step "operator console"
scripts/test-console.sh
step "all suites passed"
