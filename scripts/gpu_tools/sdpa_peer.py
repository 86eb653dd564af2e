#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of `brrr bench --backend cuda attn_*`
(12 heads of 64, bf16, q/k/v as head views of [batch, seq, 768] rows, as the exports have them),
per SDPA backend (flash, cuDNN, memory-efficient), each call a CUDA-graph replay of 20 calls,
median over rounds. Prints one line per workload and backend: microseconds and TFLOP/s
(4 * b * h * s^2 * d, halved for causal), for comparison with brrr's fused kernel.
  python3 scripts/gpu_tools/sdpa_peer.py [--rounds 7]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WORKLOADS = {  # name: (batch, seq, mask)
    "attn_bert_b1": (1, 128, "additive"),
    "attn_bert_b32": (32, 128, "additive"),
    "attn_gpt2_b1": (1, 128, "causal"),
    "attn_gpt2_b16": (16, 128, "causal"),
    "attn_vit_b1": (1, 197, "none"),
    "attn_vit_b32": (32, 197, "none"),
}
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    H, D = 12, 64
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"{torch.cuda.get_device_name()}")
    for name, (b, s, mask) in WORKLOADS.items():
        qkv = [torch.randn(b, s, H * D, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        q, k, v = (t.view(b, s, H, D).transpose(1, 2) for t in qkv)
        kw = {}
        if mask == "additive":  # BERT's: [b, 1, 1, s], 0 or a large negative
            m = torch.zeros(b, 1, 1, s, device="cuda", dtype=torch.bfloat16)
            m[:, :, :, s - 8:] = -10000.0
            kw["attn_mask"] = m.expand(b, H, s, s)
        elif mask == "causal":
            kw["is_causal"] = True
        flops = 4.0 * b * H * s * s * D * (0.5 if mask == "causal" else 1.0)
        for bname, backend in BACKENDS.items():
            try:
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, **kw)
                    torch.cuda.synchronize()
                    st = torch.cuda.Stream()
                    st.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(st):
                        for _ in range(3):
                            out = F.scaled_dot_product_attention(q, k, v, **kw)
                    torch.cuda.current_stream().wait_stream(st)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        for _ in range(args.calls):
                            out = F.scaled_dot_product_attention(q, k, v, **kw)
                times = []
                for _ in range(args.rounds):
                    g.replay()
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    g.replay()
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1) * 1e3 / args.calls)
                us = statistics.median(times)
                print(f"{name} {bname}: {us:.2f} us  {flops / us / 1e6:.1f} TFLOP/s  "
                      f"(spread {min(times):.2f}-{max(times):.2f})", flush=True)
            except Exception as e:  # a backend that does not take this shape
                print(f"{name} {bname}: not supported ({str(e).splitlines()[0][:100]})", flush=True)


if __name__ == "__main__":
    main()
