#!/usr/bin/python3
"""Write the models libtensor's runners execute, with the outputs torch gives for them.

    /usr/bin/python3 models/gen_models.py OUTDIR

OUTDIR/gpt2.safetensors
    A GPT-2 architecture (the small configuration below: 4 layers, width 256, 4 heads,
    vocabulary 8192, context 256) with weights drawn from torch's generator with a fixed seed,
    in the names and layouts of torch.nn.Linear (weight [out, in]).
OUTDIR/gpt2_expected.safetensors
    "prompt" (int64), the logits torch computes for the prompt ("logits", [T, vocab]), the
    tokens its greedy decoding generates from the prompt ("generated", recomputing the whole
    sequence at each step, no cache) and the margin between the best and second-best logit
    at each step ("margins": the decoding is only comparable where it is not a near tie);
    and for each prompt the demo serves, "demo.I.prompt", "demo.I.generated" and the
    smallest margin "demo.I.margin".

The same seed and torch version write the same bytes. The model is written here in plain
torch (torch 1.13 has neither transformers nor scaled_dot_product_attention): this file is
the reference the C runner (models/gpt2.c) is checked against.
"""

import json
import math
import os
import struct
import sys

import torch

GPT2 = dict(n_layer=4, n_embd=256, n_head=4, vocab=8192, n_ctx=256)
PROMPT = [1, 517, 4099, 23, 7, 7000, 88, 1024]
# The prompts `make demo` serves, one per worker (the first is PROMPT).
# Each decodes without a near tie (its smallest margin is at least 0.037).
DEMO_PROMPTS = [PROMPT, [6091, 7685, 4039], [2139, 2175, 6780, 1747],
                [5205, 7848, 4489, 4768, 7701, 6615, 2400, 1844]]
NEW_TOKENS = 24


def save_safetensors(path, tensors, metadata=None):
    """The safetensors format: an 8-byte little-endian header length, a JSON header, the data."""
    names = {torch.float32: "F32", torch.int64: "I64", torch.float64: "F64"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def gpt2_weights(cfg, seed=2019):
    """Weights large enough that the greedy decoding does not repeat one token and that
    its best logit leads the second by a margin (0.037 at the closest step) far above the
    runners' rounding differences."""
    g = torch.Generator().manual_seed(seed)
    C, V = cfg["n_embd"], cfg["vocab"]

    def normal(*shape, std):
        return torch.randn(*shape, generator=g) * std

    w = {"wte.weight": normal(V, C, std=0.15), "wpe.weight": normal(cfg["n_ctx"], C, std=0.1)}
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        w[p + "ln_1.weight"] = 1 + normal(C, std=0.1)
        w[p + "ln_1.bias"] = normal(C, std=0.1)
        w[p + "attn.c_attn.weight"] = normal(3 * C, C, std=0.32)
        w[p + "attn.c_attn.bias"] = normal(3 * C, std=0.02)
        w[p + "attn.c_proj.weight"] = normal(C, C, std=0.2)
        w[p + "attn.c_proj.bias"] = normal(C, std=0.02)
        w[p + "ln_2.weight"] = 1 + normal(C, std=0.1)
        w[p + "ln_2.bias"] = normal(C, std=0.1)
        w[p + "mlp.c_fc.weight"] = normal(4 * C, C, std=0.24)
        w[p + "mlp.c_fc.bias"] = normal(4 * C, std=0.02)
        w[p + "mlp.c_proj.weight"] = normal(C, 4 * C, std=0.12)
        w[p + "mlp.c_proj.bias"] = normal(C, std=0.02)
    w["ln_f.weight"] = 1 + normal(C, std=0.1)
    w["ln_f.bias"] = normal(C, std=0.1)
    return w


def gpt2_forward(w, cfg, tokens):
    """Logits [T, vocab] for the token list, as the C runner computes them (without cache)."""
    F = torch.nn.functional
    C, H = cfg["n_embd"], cfg["n_head"]
    D = C // H
    T = len(tokens)
    idx = torch.tensor(tokens)
    x = F.embedding(idx, w["wte.weight"]) + w["wpe.weight"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = F.linear(h, w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"])
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + F.linear(y, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + F.linear(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return F.linear(x, w["wte.weight"])


def greedy(w, cfg, prompt):
    seq, margins = list(prompt), []
    for _ in range(NEW_TOKENS):
        last = gpt2_forward(w, cfg, seq)[-1]
        top = last.topk(2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(prompt):], margins


def gpt2_expected(w, cfg):
    logits = gpt2_forward(w, cfg, PROMPT)
    gen, margins = greedy(w, cfg, PROMPT)
    e = {"prompt": torch.tensor(PROMPT, dtype=torch.int64), "logits": logits,
         "generated": torch.tensor(gen, dtype=torch.int64),
         "margins": torch.tensor(margins, dtype=torch.float64)}
    for i, p in enumerate(DEMO_PROMPTS):
        gen, margins = greedy(w, cfg, p)
        e["demo.%d.prompt" % i] = torch.tensor(p, dtype=torch.int64)
        e["demo.%d.generated" % i] = torch.tensor(gen, dtype=torch.int64)
        e["demo.%d.margin" % i] = torch.tensor([min(margins)], dtype=torch.float64)
    return e


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: %s OUTDIR\n" % argv[0])
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    with torch.no_grad():
        w = gpt2_weights(GPT2)
        meta = {k: str(v) for k, v in GPT2.items()}
        save_safetensors(os.path.join(out, "gpt2.safetensors"), w, meta)
        e = gpt2_expected(w, GPT2)
        save_safetensors(os.path.join(out, "gpt2_expected.safetensors"), e,
                         {"torch": torch.__version__})
    print("gpt2: %d tensors, %d parameters; generated %s; smallest margin %.4f" % (
        len(w), sum(t.numel() for t in w.values()), e["generated"].tolist(),
        float(e["margins"].min())))
    for i in range(len(DEMO_PROMPTS)):
        print("demo prompt %d: generated %s, smallest margin %.4f" % (
            i, e["demo.%d.generated" % i].tolist(), float(e["demo.%d.margin" % i])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
