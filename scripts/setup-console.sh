#!/usr/bin/env bash
# Installs what the operator console (src-tauri/, ui/) needs to build, run and test on a fresh
# Debian 12 machine. Idempotent; safe to rerun. Runs the core setup (embedded PostgreSQL) first.
#  - Debian packages: WebKitGTK 4.1 and friends (Tauri 2 on Linux), Xvfb + xauth (a real window
#    without a display), webkit2gtk-driver (WebKitWebDriver for the end-to-end suite),
#    imagemagick (`import -window root` screenshots of the Xvfb screen), patchelf
#    (scripts/build-package.sh points the packaged PostgreSQL at its own libraries).
#  - tauri-driver (the WebDriver bridge), `cargo install --locked` into .mesh/cargo-tools.
#  - the UI's npm dependencies (`npm ci` in ui/, from the committed package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

APT_PACKAGES=(
  libwebkit2gtk-4.1-dev librsvg2-dev libayatana-appindicator3-dev libsoup-3.0-dev libjavascriptcoregtk-4.1-dev
  build-essential pkg-config file xvfb xauth webkit2gtk-driver imagemagick dbus-x11 fonts-dejavu-core
  patchelf
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-console: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

TOOLS_DIR="${MESH_CARGO_TOOLS:-$PWD/.mesh/cargo-tools}"
TAURI_DRIVER_VERSION="${TAURI_DRIVER_VERSION:-2.1.0}"
if [ ! -x "$TOOLS_DIR/bin/tauri-driver" ]; then
  echo "setup-console: installing tauri-driver $TAURI_DRIVER_VERSION into $TOOLS_DIR"
  cargo install --locked --root "$TOOLS_DIR" tauri-driver --version "$TAURI_DRIVER_VERSION"
fi

if [ ! -d ui/node_modules ] || [ ui/package-lock.json -nt ui/node_modules/.package-lock.json ]; then
  echo "setup-console: installing UI dependencies (npm ci)"
  (cd ui && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup-console: ready (tauri-driver in $TOOLS_DIR/bin)"
