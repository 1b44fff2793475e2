"""Independent reference vectors for the local all-MiniLM-L6-v2 embedder (tests/semantic_local.rs).

A plain numpy re-implementation of BERT + mean pooling + L2 normalisation (float64), reading the
same model.safetensors and tokenizer.json that scripts/setup-embedder.sh installs. It shares no
code with the Rust embedder (candle): only the weights and the WordPiece vocabulary.

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install numpy safetensors tokenizers
    /tmp/ref/bin/python tests/semantic_fixtures/minilm_reference.py .mesh/models/all-MiniLM-L6-v2 \
        > tests/semantic_fixtures/minilm_reference.json
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "The CTO prefers tabs over spaces for indentation.",
    "Which indentation style does the CTO like?",
]

model_dir = sys.argv[1]
w = {k: v.astype(np.float64) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
cfg = json.load(open(f"{model_dir}/config.json"))
tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
tok.no_padding()
tok.enable_truncation(256)
erf = np.vectorize(math.erf)


def layer_norm(x, prefix):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + cfg["layer_norm_eps"]) * w[prefix + ".weight"] + w[prefix + ".bias"]


def dense(x, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def embed(text):
    ids = np.array(tok.encode(text).ids)
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = layer_norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (dense(x, f"{p}.attention.self.{m}").reshape(n, heads, d).transpose(1, 0, 2) for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, heads * d)
        x = layer_norm(dense(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = layer_norm(dense(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    pooled = x.mean(0)
    return (pooled / np.linalg.norm(pooled)).tolist()


json.dump({"model": "all-MiniLM-L6-v2", "sentences": [{"text": s, "embedding": embed(s)} for s in SENTENCES]}, sys.stdout)
