#!/usr/bin/env python3
"""Independent float64 reference for Llama GGUF models, for golden test data.

Dequantizes every tensor with the `gguf` package (pip install gguf numpy) and runs the
textbook forward pass in numpy (float64 activations, full softmax, adjacent-pair RoPE),
sharing no code with Arbor. Prints a JSON record with the last position's top logits,
the top logits at other prompt positions (--at), and the greedy continuation.

    python3 tools/reference_forward.py MODEL.gguf 1,9690,198,... --greedy 6 [--at 100,300]
"""
import argparse
import json

import gguf
import numpy as np


def load(path):
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}

    def field(key):
        f = reader.fields[key]
        return f.parts[f.data[0]][0]

    def weight(name):
        t = tensors[name]
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        return np.asarray(values, dtype=np.float64).reshape([int(x) for x in reversed(t.shape.tolist())])

    cfg = {
        "layers": int(field("llama.block_count")),
        "heads": int(field("llama.attention.head_count")),
        "kv_heads": int(field("llama.attention.head_count_kv")),
        "theta": float(field("llama.rope.freq_base")),
        "eps": float(field("llama.attention.layer_norm_rms_epsilon")),
    }
    names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
    layers = [{n: weight(f"blk.{l}.{n}.weight") for n in names} for l in range(cfg["layers"])]
    embd = weight("token_embd.weight")
    output = weight("output.weight") if "output.weight" in tensors else embd
    return cfg, embd, layers, weight("output_norm.weight"), output


def forward(model, tokens):
    cfg, embd, layers, out_norm, output = model
    n, hidden = len(tokens), embd.shape[1]
    heads, kv_heads = cfg["heads"], cfg["kv_heads"]
    d = hidden // heads

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg["eps"]) * g

    def rope(x):  # x [n, heads, d]; rotate adjacent pairs (2i, 2i+1)
        angle = np.arange(n)[:, None] * cfg["theta"] ** (-2.0 * np.arange(d // 2) / d)
        c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out

    x = embd[tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for w in layers:
        h = rms(x, w["attn_norm"])
        q = rope((h @ w["attn_q"].T).reshape(n, heads, d))
        k = rope((h @ w["attn_k"].T).reshape(n, kv_heads, d))
        v = (h @ w["attn_v"].T).reshape(n, kv_heads, d)
        att = np.zeros((n, heads, d))
        for head in range(heads):
            kv = head // (heads // kv_heads)
            s = q[:, head] @ k[:, kv].T / np.sqrt(d) + mask
            p = np.exp(s - s.max(-1, keepdims=True))
            att[:, head] = (p / p.sum(-1, keepdims=True)) @ v[:, kv]
        x = x + att.reshape(n, hidden) @ w["attn_output"].T
        h = rms(x, w["ffn_norm"])
        g, u = h @ w["ffn_gate"].T, h @ w["ffn_up"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w["ffn_down"].T
    return rms(x, out_norm) @ output.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens", help="comma-separated prompt token ids")
    ap.add_argument("--greedy", type=int, default=6)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--at", default="", help="comma-separated prompt positions to report top logits at")
    args = ap.parse_args()
    model = load(args.model)
    prompt = [int(t) for t in args.tokens.split(",")]
    logits = forward(model, prompt)
    last = logits[-1]
    top = np.argsort(-last)[: args.top]
    at = {}
    for pos in [int(p) for p in args.at.split(",") if p]:
        row = logits[pos]
        at[str(pos)] = {str(int(i)): float(row[i]) for i in np.argsort(-row)[: args.top]}
    greedy, seq = [], list(prompt)
    for _ in range(args.greedy):
        t = int(forward(model, seq)[-1].argmax())
        greedy.append(t)
        seq.append(t)
    record = {"prompt": prompt, "top_logits": {str(int(i)): float(last[i]) for i in top}, "greedy": greedy}
    if at:
        record["top_logits_at"] = at
    print(json.dumps(record))


if __name__ == "__main__":
    main()
