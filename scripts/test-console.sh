#!/usr/bin/env bash
# Tests the operator console: UI lint + typecheck + Vitest component tests, the Rust tests of the
# app crate (including the bindings-staleness test), then the real-window end-to-end suite: the
# built app under Xvfb, driven by tauri-driver + WebKitWebDriver, against a fresh embedded
# PostgreSQL seeded with the demo workspace. Screenshots of every view land in
# $CONSOLE_SCREENSHOTS (default target/console-screenshots).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-console.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
SCREENSHOTS="${CONSOLE_SCREENSHOTS:-$PWD/target/console-screenshots}"
TOOLS_DIR="${MESH_CARGO_TOOLS:-$PWD/.mesh/cargo-tools}"

echo "== console: UI lint, typecheck, component tests"
(cd ui && npm run --silent lint && npm run --silent typecheck && npm test --silent)

echo "== console: build UI and app"
(cd ui && npm run --silent build)
# The UI is embedded at compile time: make sure the app crate sees a fresh ui/dist.
touch src-tauri/build.rs
# The core's lint (scripts/test.sh) cannot compile this crate (it embeds ui/dist): lint it now,
# before the slow build and suites, so a compile error in the console fails in a minute.
echo "== console: clippy"
cargo clippy --locked -p mesh-memory-console --all-targets -- -D warnings
cargo build --locked -p mesh-memory -p mesh-memory-console \
  --bin mesh-memory --bin mesh-memory-console --example e2e_fixture

echo "== console: app crate tests (bindings must be current)"
cargo test --locked -p mesh-memory-console

echo "== console: end-to-end in a real window"
export MESH_DATA_DIR="$CARGO_TARGET_DIR/console-e2e/pg"
unset DATABASE_URL
BIN="$CARGO_TARGET_DIR/debug"
"$BIN/mesh-memory" db stop >/dev/null 2>&1 || true
rm -rf "$MESH_DATA_DIR" "$SCREENSHOTS"
mkdir -p "$(dirname "$MESH_DATA_DIR")" "$SCREENSHOTS"
# A fresh webview profile (local storage keeps the theme), so every run starts the same way.
export XDG_DATA_HOME="$CARGO_TARGET_DIR/console-e2e/xdg-data" XDG_CACHE_HOME="$CARGO_TARGET_DIR/console-e2e/xdg-cache"
rm -rf "$XDG_DATA_HOME" "$XDG_CACHE_HOME"
"$BIN/mesh-memory" db start --ephemeral
trap '"$BIN/mesh-memory" db stop >/dev/null 2>&1 || true' EXIT
FIXTURE_JSON="$("$BIN/examples/e2e_fixture" seed)"
export FIXTURE_JSON SCREENSHOT_DIR="$SCREENSHOTS"
export CONSOLE_APP="$BIN/mesh-memory-console" TAURI_DRIVER="$TOOLS_DIR/bin/tauri-driver" FIXTURE="$BIN/examples/e2e_fixture"
# WebKitGTK under Xvfb: without compositing the window paints (otherwise it can stay blank).
export WEBKIT_DISABLE_COMPOSITING_MODE=1
xvfb-run -a -s "-screen 0 1400x900x24" node --test ui/e2e/console.e2e.mjs
echo "console: all suites passed; screenshots in $SCREENSHOTS"
