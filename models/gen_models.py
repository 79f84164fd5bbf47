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

OUTDIR/resnet18.safetensors
    ResNet-18 as torchvision builds it (BasicBlocks [2, 2, 2, 2] of widths 64..512, a 1000-way
    fc) in torchvision's parameter names ("conv1.weight", "layer2.0.downsample.1.running_var",
    "fc.bias", ...): Kaiming-normal convolutions, and batch-norm statistics set from what a
    calibration batch gives each layer in float64, then perturbed (the mean by 0.2 of the
    standard deviation, the variance by a factor in [0.8, 1.2]), with random affine weights,
    and fc.bias less the calibration batch's mean logits: every layer's normalisation matters,
    the activations stay of order one, and different images get different classes.
OUTDIR/resnet18_expected.safetensors
    torch's logits in evaluation mode for a batch of one image ("images1", "logits1") and a
    batch of four ("images4", "logits4"), [N, 3, 96, 80] float32 of unit variance, and the
    margin between each image's best and second-best logit ("margins1", "margins4": the
    classes are only comparable where they are not a near tie). The images are 96x80 rather
    than 224x224 so that check_models stays fast under sanitizers: a 96x80 image still
    exercises every layer (layer4 runs on 3x3 maps) and the odd sizes test the padding at the
    edges.

The same seed and torch version write the same bytes. The model is written here in plain
torch (torch 1.13 has neither transformers nor scaled_dot_product_attention): this file is
the reference the C runners (models/gpt2.c, models/resnet.c) are checked against.
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

RESNET18 = dict(num_classes=1000, height=96, width=80)
RESNET_WIDTHS = [64, 128, 256, 512]


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


def resnet18_blocks():
    """(prefix, in channels, out channels, stride) of each BasicBlock, as torchvision."""
    cin = 64
    for i, c in enumerate(RESNET_WIDTHS):
        for b in range(2):
            yield "layer%d.%d." % (i + 1, b), cin, c, 2 if i > 0 and b == 0 else 1
            cin = c


def resnet18_forward(w, x, calibrate=None):
    """Logits [N, classes] of images x in evaluation mode (F.batch_norm with the running
    statistics, eps 1e-5). With calibrate (a generator), each batch norm first sets its
    running statistics from x's own, perturbed."""
    F = torch.nn.functional

    def bn(h, name):
        if calibrate is not None:
            m, v = h.mean((0, 2, 3)), h.var((0, 2, 3))
            c = m.numel()
            w[name + ".running_mean"] = m + 0.2 * v.sqrt() * torch.randn(
                c, generator=calibrate, dtype=h.dtype)
            w[name + ".running_var"] = v * (0.8 + 0.4 * torch.rand(
                c, generator=calibrate, dtype=h.dtype))
        return F.batch_norm(h, w[name + ".running_mean"], w[name + ".running_var"],
                            w[name + ".weight"], w[name + ".bias"], False, 0.1, 1e-5)

    x = F.relu(bn(F.conv2d(x, w["conv1.weight"], stride=2, padding=3), "bn1"))
    x = F.max_pool2d(x, 3, 2, 1)
    for p, cin, c, s in resnet18_blocks():
        h = F.relu(bn(F.conv2d(x, w[p + "conv1.weight"], stride=s, padding=1), p + "bn1"))
        h = bn(F.conv2d(h, w[p + "conv2.weight"], padding=1), p + "bn2")
        if s != 1 or cin != c:
            x = bn(F.conv2d(x, w[p + "downsample.0.weight"], stride=s), p + "downsample.1")
        x = F.relu(h + x)
    x = F.adaptive_avg_pool2d(x, 1).flatten(1)
    if calibrate is not None:
        # Centre the logits: otherwise the features every image shares pick one class.
        w["fc.bias"] = w["fc.bias"] - F.linear(x.mean(0), w["fc.weight"])
    return F.linear(x, w["fc.weight"], w["fc.bias"])


def resnet18_weights(cfg, seed=1929):
    """The weights and the generator (to draw the images from after them). The seed is one
    that gives the five images five classes, each best logit leading by at least 0.066."""
    g = torch.Generator().manual_seed(seed)
    w = {}

    def conv(name, o, i, k):
        w[name + ".weight"] = torch.randn(o, i, k, k, generator=g) * math.sqrt(2 / (i * k * k))

    def bn(name, c):
        w[name + ".weight"] = 0.75 + 0.5 * torch.rand(c, generator=g)
        w[name + ".bias"] = 0.1 * torch.randn(c, generator=g)

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    for p, cin, c, s in resnet18_blocks():
        conv(p + "conv1", c, cin, 3)
        bn(p + "bn1", c)
        conv(p + "conv2", c, c, 3)
        bn(p + "bn2", c)
        if s != 1 or cin != c:
            conv(p + "downsample.0", c, cin, 1)
            bn(p + "downsample.1", c)
    n = cfg["num_classes"]
    w["fc.weight"] = torch.randn(n, 512, generator=g) * math.sqrt(1 / 512)
    w["fc.bias"] = 0.1 * torch.randn(n, generator=g)
    # The running statistics (and fc.bias's centring): from a calibration batch, computed in
    # float64 so that they hardly depend on the order this machine's kernels sum in, then
    # rounded to float32.
    wd = {k: v.double() for k, v in w.items()}
    images = torch.randn(8, 3, cfg["height"], cfg["width"], generator=g)
    resnet18_forward(wd, images.double(), calibrate=g)
    # torchvision's order: each module's parameters, then its buffers.
    ordered = {}
    for k, v in w.items():
        ordered[k] = wd[k].float() if k == "fc.bias" else v
        base = k[:-len("bias")]
        if k.endswith(".bias") and base + "running_mean" in wd:
            for b in ("running_mean", "running_var"):
                ordered[base + b] = wd[base + b].float()
    return ordered, g


def resnet18_expected(w, cfg, g):
    e = {}
    for n in (1, 4):
        x = torch.randn(n, 3, cfg["height"], cfg["width"], generator=g)
        y = resnet18_forward(w, x)
        top = y.topk(2, dim=1).values
        e["images%d" % n] = x
        e["logits%d" % n] = y
        e["margins%d" % n] = (top[:, 0] - top[:, 1]).double()
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
        rw, rg = resnet18_weights(RESNET18)
        save_safetensors(os.path.join(out, "resnet18.safetensors"), rw,
                         {k: str(v) for k, v in RESNET18.items()})
        re = resnet18_expected(rw, RESNET18, rg)
        save_safetensors(os.path.join(out, "resnet18_expected.safetensors"), re,
                         {"torch": torch.__version__})
    print("gpt2: %d tensors, %d parameters; generated %s; smallest margin %.4f" % (
        len(w), sum(t.numel() for t in w.values()), e["generated"].tolist(),
        float(e["margins"].min())))
    for i in range(len(DEMO_PROMPTS)):
        print("demo prompt %d: generated %s, smallest margin %.4f" % (
            i, e["demo.%d.generated" % i].tolist(), float(e["demo.%d.margin" % i])))
    print("resnet18: %d tensors, %d values; classes %s, %s; smallest margin %.4f" % (
        len(rw), sum(t.numel() for t in rw.values()), re["logits1"].argmax(1).tolist(),
        re["logits4"].argmax(1).tolist(),
        min(float(re["margins1"].min()), float(re["margins4"].min()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
