#!/usr/bin/env python3
"""The PyTorch peer of `make bench`: GPT-2-style training steps of a given shape.

Same architecture as meshtrain's GPT (pre-LayerNorm blocks, learned positions,
tanh-GELU MLP of 4x width, embedding tied to the output head, AdamW), random
tokens, timed per step after warm-up. Prints one line (or one JSON object with
--json) holding tokens/s and model GFLOP/s so that scripts can compare the two
engines side by side in one command.

  torch_gpt.py --layers 6 --hidden 384 --heads 6 --seq 256 --batch 8 \
               --vocab 50304 --steps 5 [--bf16] [--device cuda] [--compile]

CPU threads: --threads (default: $THREADS or 2). Attention is PyTorch's
scaled_dot_product_attention where it exists (2.x) and the explicit masked
softmax on 1.x; on CUDA the AdamW is the fused one and each step's time is taken
after a device synchronize.
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("layers", 6), ("hidden", 384), ("heads", 6), ("seq", 256), ("batch", 8),
                          ("vocab", 50304), ("steps", 5)]:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (fp32 master weights)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--threads", type=int, default=int(os.environ.get("THREADS", "2")))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    if a.hidden % a.heads:
        p.error("--hidden must be divisible by --heads")
    return a


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(hd), causal) v. q, k, v: (B, H, T, hd).
    PyTorch 2's fused kernel where it exists; the explicit form on 1.x (Debian 12)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    """x + attn(ln1(x)); x + mlp(ln2(x)). x: (B, T, D)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """Token + position embedding, L blocks, final LayerNorm, tied head, mean cross-entropy."""

    def __init__(self, a):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.hidden)
        self.pos = nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.hidden)
        for w in self.parameters():
            if w.dim() > 1:
                nn.init.normal_(w, std=0.02)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cuda = a.device.startswith("cuda")
    model = GPT(a).to(a.device)
    # The fused AdamW (PyTorch >= 2.0) on a GPU; the default elsewhere.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if cuda else {}))
    step_fn = torch.compile(model) if a.compile else model
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=a.device)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=a.device)
    warmup = 3 if a.compile else 1
    times, loss = [], None
    for _ in range(warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.bf16):
            loss = step_fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    step = statistics.median(times[warmup:])
    params = sum(w.numel() for w in model.parameters())
    tokens = a.batch * a.seq
    # Model FLOPs of a step (Narayanan et al., SC21, eq. 3 without recompute):
    # 6 per parameter per token, plus attention scores and values, 12 L D S per token.
    flops = 6 * params * tokens + 12 * a.layers * a.hidden * a.seq * tokens
    result = {
        "engine": f"torch {torch.__version__}", "device": a.device, "compiled": a.compile,
        "dtype": "bf16" if a.bf16 else "fp32", "params": params, "step_median_s": step,
        "tokens_per_s": tokens / step, "gflops": flops / step / 1e9, "loss": float(loss),
    }
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{result['engine']} {a.device}{' compiled' if a.compile else ''} {result['dtype']} "
              f"params={params / 1e6:.1f}M step_median={step * 1e3:.0f}ms "
              f"tokens/s={result['tokens_per_s']:.0f} GFLOP/s={result['gflops']:.1f} loss={result['loss']:.3f}")
    if not math.isfinite(result["loss"]):
        raise SystemExit("torch_gpt: the loss is not finite")


if __name__ == "__main__":
    main()
