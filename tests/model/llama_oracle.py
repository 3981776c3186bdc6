#!/usr/bin/python3
"""An independent LlamaForCausalLM forward pass in float64, written after
Hugging Face's modeling_llama.py with Debian's python3-torch: the oracle
that tests/model/llama_model_test.cc compares model/llama/llama_model.h
against.

usage: llama_oracle.py DIR ID [ID ...]
Reads DIR/config.json and DIR/model.safetensors (or its sharded index) and
prints the logits of the token ids as a JSON list of rows.
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).to(torch.float64)
    return out


def read_weights(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, "model.safetensors"))
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    weights = {}
    for shard in sorted(set(weight_map.values())):
        weights.update(read_safetensors(os.path.join(directory, shard)))
    return weights


def inv_freq(config):
    dim = config.get("head_dim") or (config["hidden_size"] //
                                     config["num_attention_heads"])
    base = config.get("rope_theta", 10000.0)
    freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    scaling = config.get("rope_scaling")
    if not scaling or scaling.get("rope_type", scaling.get("type")) != "llama3":
        return freq
    # transformers' _compute_llama3_parameters
    factor = scaling["factor"]
    low = scaling["low_freq_factor"]
    high = scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_wavelen = old / low
    high_wavelen = old / high
    wavelen = 2 * math.pi / freq
    llama = torch.where(wavelen > low_wavelen, freq / factor, freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, llama)


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(config, w, ids):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    dim = config.get("head_dim") or config["hidden_size"] // heads
    eps = config["rms_norm_eps"]
    t = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq(config))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((t, t), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(t, heads, dim).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(t, kv_heads, dim).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(t, kv_heads, dim).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(heads // kv_heads, dim=0)  # repeat_kv
        v = v.repeat_interleave(heads // kv_heads, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(dim) + mask
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + attn.transpose(0, 1).reshape(t, heads * dim) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings") \
        else w["lm_head.weight"]
    return x @ head.T


def main():
    directory = sys.argv[1]
    ids = [int(a) for a in sys.argv[2:]]
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    logits = forward(config, read_weights(directory), ids)
    json.dump(logits.tolist(), sys.stdout)


if __name__ == "__main__":
    main()
