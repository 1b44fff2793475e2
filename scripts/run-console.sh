#!/usr/bin/env bash
# The main job: opens the Mesh Memory operator console on demo data.
#   1. installs what is needed (scripts/setup-console.sh: PostgreSQL, WebKitGTK, npm packages),
#   2. builds the UI (ui/dist) and the app with the UI embedded,
#   3. seeds the demo workspace (once) into the embedded default database (or DATABASE_URL),
#   4. opens the console window. The first run asks you to create your operator role.
# Without a display (no DISPLAY / WAYLAND_DISPLAY) the window opens under Xvfb and a screenshot
# is saved to target/console-screenshots/run-console.png after 20 seconds; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-console.sh

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
echo "run-console: building the UI"
(cd ui && npm run --silent build)
touch src-tauri/build.rs # the UI is embedded at compile time
echo "run-console: building the app (first build takes several minutes)"
cargo build --locked -p mesh-memory -p mesh-memory-console --bin mesh-memory --bin mesh-memory-console

BIN="$CARGO_TARGET_DIR/debug"
echo "run-console: seeding the demo workspace"
"$BIN/mesh-memory" demo seed >/dev/null
APP="$BIN/mesh-memory-console"

if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  SHOT="$PWD/target/console-screenshots/run-console.png"
  mkdir -p "$(dirname "$SHOT")"
  echo "run-console: no display found; opening the console under Xvfb (screenshot: $SHOT; Ctrl-C stops)"
  export WEBKIT_DISABLE_COMPOSITING_MODE=1
  exec xvfb-run -a -s "-screen 0 1400x900x24" bash -c '
    "$1" & app=$!
    trap "kill $app 2>/dev/null; wait $app" INT TERM
    sleep 20
    import -window root "$2" && echo "run-console: screenshot saved to $2"
    wait $app' run-console "$APP" "$SHOT"
fi
echo "run-console: opening the console"
exec "$APP"
