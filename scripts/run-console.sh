#!/usr/bin/env bash
# The main job: opens the Mesh Memory operator console on demo data.
#   1. installs what is needed (scripts/setup-console.sh: PostgreSQL, WebKitGTK, npm packages),
#   2. builds the UI (ui/dist) and the app with the UI embedded,
#   3. seeds the demo workspace (once) into the embedded default database (or DATABASE_URL),
#   4. opens the console window on the local demo (`--demo`; with DATABASE_URL, on that database).
#      The first run asks you to create your operator role.
# Without a display (no DISPLAY / WAYLAND_DISPLAY) the window opens under Xvfb and a screenshot
# is saved to target/console-screenshots/run-console.png after 20 seconds. Ctrl-C or SIGTERM
# (e.g. from `timeout`) close the console, which stops the embedded PostgreSQL it started.
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

if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  echo "run-console: opening the console"
  # The app itself gets Ctrl-C and SIGTERM, and stops the cluster it started on the way out.
  exec "$APP" --demo
fi

# No display: the window opens on a private Xvfb. With job control every background job has its
# own process group, so a signal sent to this script's group (Ctrl-C, `timeout`) reaches only
# this script, which passes SIGTERM to the app, waits for it to stop its cluster and exit, and
# only then stops the X server (an app that loses its display dies without cleaning up).
set -m
SHOT="$PWD/target/console-screenshots/run-console.png"
mkdir -p "$(dirname "$SHOT")"
echo "run-console: no display found; opening the console under Xvfb (screenshot: $SHOT; Ctrl-C stops)"
export WEBKIT_DISABLE_COMPOSITING_MODE=1
display_file="$(mktemp)"
Xvfb -displayfd 3 -screen 0 1400x900x24 -nolisten tcp 3>"$display_file" >/dev/null 2>&1 &
xvfb=$!
trap 'kill "$xvfb" 2>/dev/null || true; rm -f "$display_file"' EXIT
for _ in $(seq 100); do
  [ -s "$display_file" ] && break
  sleep 0.1
done
[ -s "$display_file" ] || { echo "run-console: Xvfb did not start" >&2; exit 1; }
export DISPLAY=":$(head -1 "$display_file")"
"$APP" --demo &
app=$!
trap 'kill -TERM "$app" 2>/dev/null || true' INT TERM
(sleep 20 && import -window root "$SHOT" && echo "run-console: screenshot saved to $SHOT") &
shot=$!
# `wait` returns early when a trapped signal arrives: wait again until the app has exited.
status=0
while kill -0 "$app" 2>/dev/null; do
  wait "$app" && status=0 || status=$?
done
kill -- -"$shot" 2>/dev/null || true
exit "$status"
