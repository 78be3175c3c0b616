#!/usr/bin/env python3
"""PyTorch's kernels at the shapes of bench_gpu_kernels, for ratios in one run.

bf16 matmuls (torch.matmul, cuBLAS/cuBLASLt underneath) at the same M x K x N,
and causal attention by F.scaled_dot_product_attention (FlashAttention or
cuDNN, whichever PyTorch picks) at B = 8, T = 1024, head 64, forward and
backward, timed by CUDA events after warm-up; the FLOP counts are those of
kernels/flops.h (matmul 2MKN; causal attention 4 and 10 x B H hd T(T+1)/2).
Prints JSON: {"benchmarks": [{"name", "real_time" (ms), "TFLOP/s"}]}, the
names matching bench_gpu_kernels'.
"""
import json
import sys

import torch
import torch.nn.functional as F


def timed(fn, flops, reps=20):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / reps
    return ms, flops / (ms * 1e-3) / 1e12


def main():
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no GPU visible to PyTorch"}))
        return 1
    dev, bf = "cuda", torch.bfloat16
    out = []
    shapes = [(8192, 8192, 8192), (8192, 768, 2304), (8192, 768, 768), (8192, 768, 3072), (8192, 3072, 768),
              (8192, 768, 50304), (8192, 1280, 3840), (8192, 1280, 5120), (8192, 5120, 1280),
              (8192, 1280, 50304)]
    for m, k, n in shapes:
        a = torch.randn(m, k, device=dev, dtype=bf)
        w = torch.randn(n, k, device=dev, dtype=bf)
        ms, tf = timed(lambda: torch.matmul(a, w.t()), 2.0 * m * k * n)
        out.append({"name": f"Matmul_Bf16/M:{m}/K:{k}/N:{n}/manual_time", "real_time": ms, "TFLOP/s": tf})
    B, T, hd = 8, 1024, 64
    pairs = T * (T + 1) // 2
    for h in (12, 20):
        q, k, v = (torch.randn(B, h, T, hd, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
        ms, tf = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 4.0 * B * h * hd * pairs)
        out.append({"name": f"Attention_Bf16/H:{h}/backward:0/manual_time", "real_time": ms, "TFLOP/s": tf})
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        do = torch.randn_like(o)
        ms, tf = timed(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), 10.0 * B * h * hd * pairs)
        out.append({"name": f"Attention_Bf16/H:{h}/backward:1/manual_time", "real_time": ms, "TFLOP/s": tf})
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "benchmarks": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
