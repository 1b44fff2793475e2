#!/usr/bin/env bash
# Tests the package as an operator gets it:
#   1. builds it (scripts/build-package.sh) and installs it with apt (as root, or through sudo),
#   2. checks what it installed: `mesh-memory` on PATH with the package's version, the console,
#      its desktop entry and icon, and the CLI using the package's own PostgreSQL,
#   3. starts a PostgreSQL that requires TLS with a CA made by the test (scripts/tls-test-server.sh,
#      run with the INSTALLED CLI, so the server is the package's PostgreSQL 18 with pgvector),
#   4. launches the INSTALLED console under Xvfb with no DATABASE_URL through tauri-driver
#      (ui/e2e/package.e2e.mjs): the connection screen, a wrong CA refused, the right CA with
#      verify-full signing an auditor in to the memory browser, then the local demo on the
#      package's PostgreSQL, stopped when the console closes; screenshots and the time from
#      launch to the first screen land in $PACKAGE_SCREENSHOTS (default target/package-screenshots).
# The package stays installed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
started=$SECONDS

# The package is tested as an operator has it: nothing from the caller's environment names a
# database (scripts/test.sh exports its test cluster's DATABASE_URL).
unset DATABASE_URL
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
SCREENSHOTS="${PACKAGE_SCREENSHOTS:-$PWD/target/package-screenshots}"
TOOLS_DIR="${MESH_CARGO_TOOLS:-$PWD/.mesh/cargo-tools}"
WORK="$CARGO_TARGET_DIR/package-e2e"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

echo "== package: build"
scripts/build-package.sh
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' src-tauri/Cargo.toml | head -1)"
DEB="$CARGO_TARGET_DIR/package/mesh-memory-console_${VERSION}_amd64.deb"

echo "== package: install $DEB"
# --reinstall: a rebuilt package of the same version replaces the installed files.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --reinstall "$DEB" >/dev/null

echo "== package: what it installed"
fail() { echo "test-package: $*" >&2; exit 1; }
[ "$(command -v mesh-memory)" = /usr/bin/mesh-memory ] || fail "mesh-memory is not /usr/bin/mesh-memory on PATH"
[ "$(mesh-memory --version)" = "mesh-memory $VERSION" ] || fail "mesh-memory --version: $(mesh-memory --version)"
[ -x /usr/bin/mesh-memory-console ] || fail "no /usr/bin/mesh-memory-console"
DESKTOP="/usr/share/applications/Mesh Memory Console.desktop"
[ -f "$DESKTOP" ] || fail "no desktop entry $DESKTOP"
grep -qx 'Exec=mesh-memory-console' "$DESKTOP" || fail "the desktop entry does not start mesh-memory-console"
grep -qx 'Icon=mesh-memory-console' "$DESKTOP" || fail "the desktop entry names no icon"
[ -f /usr/share/icons/hicolor/512x512/apps/mesh-memory-console.png ] || fail "no icon"
# Not the checkout's PostgreSQL: run from / with nothing that points at it.
bin_dir="$(cd / && env -u MESH_PG_BIN MESH_DATA_DIR="$WORK/status" mesh-memory db status --json \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["bin_dir"])')"
[ "$bin_dir" = /usr/lib/mesh-memory/postgresql/bin ] || fail "the CLI uses PostgreSQL from $bin_dir"

echo "== package: a PostgreSQL that requires TLS (the installed CLI and PostgreSQL)"
cargo build --locked --example pg_tls_proxy
TLS_DIR="$WORK/tls"
MESH_BIN=/usr/bin/mesh-memory scripts/tls-test-server.sh stop "$TLS_DIR" >/dev/null 2>&1 || true # a previous run's
rm -rf "$WORK"
mkdir -p "$WORK"
cleanup() {
  MESH_BIN=/usr/bin/mesh-memory scripts/tls-test-server.sh stop "$TLS_DIR" >/dev/null 2>&1 || true
  MESH_DATA_DIR="$WORK/demo-pg" /usr/bin/mesh-memory db stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
set -a
eval "$(cd / && env -u MESH_PG_BIN MESH_BIN=/usr/bin/mesh-memory "$ROOT/scripts/tls-test-server.sh" start "$TLS_DIR")"
set +a

echo "== package: the installed console in a real window, no DATABASE_URL"
unset DATABASE_URL MESH_PG_BIN
# A fresh home: no saved connections or webview state from other runs; the local demo (not used
# here) would live under it too.
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_DATA_HOME="$WORK/home/.local/share" \
  XDG_CACHE_HOME="$WORK/home/.cache" MESH_DATA_DIR="$WORK/demo-pg"
mkdir -p "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_CACHE_HOME"
rm -rf "$SCREENSHOTS"
export CONSOLE_APP=/usr/bin/mesh-memory-console TAURI_DRIVER="$TOOLS_DIR/bin/tauri-driver" \
  SCREENSHOT_DIR="$SCREENSHOTS" CONSOLE_CONFIG_DIR="$XDG_CONFIG_HOME"
# WebKitGTK under Xvfb: without compositing the window paints (otherwise it can stay blank).
export WEBKIT_DISABLE_COMPOSITING_MODE=1
(cd / && xvfb-run -a -s "-screen 0 1400x900x24" node --test "$ROOT/ui/e2e/package.e2e.mjs")
# The console opened the local demo last; ending the session closed it, which stops the cluster.
sleep 1
if pgrep -f "postgres -D $MESH_DATA_DIR/pgdata" >/dev/null; then
  fail "the console left its local demo PostgreSQL running after it was closed"
fi
echo "package: all checks passed in $((SECONDS - started)) s; screenshots in $SCREENSHOTS"
