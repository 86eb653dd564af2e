"""PyTorch's (cuBLAS's) time for GPT-2's vocabulary projection, the peer for brrr's lm_head step.

    python3 scripts/gpu_tools/lm_head_peer.py [--rows 128,2048] [--k 768] [--vocab 50257]
    python3 scripts/gpu_tools/lm_head_peer.py --compiled-gpt2 16


bf16 x [M, K] @ W^T (W [V, K], nn.Linear's layout) per M: the output written at its odd pitch V
(what torch.compile's graph does), into rows padded to a multiple of 8 (V8), and the padded
product followed by the copy of the V real columns (what brrr runs today). Per call, the median
over 20 replays of a CUDA graph of 20 calls between two CUDA events, after 10 warm-ups, inputs
rotated over 4 buffers of random values.

--compiled-gpt2 B: GPT-2 small (random init, bf16, seq 128) under torch.compile(mode=
"reduce-overhead") at batch B: the logits' strides (inductor may pad the rows of a matmul's
output and return a strided view), and its time per forward with and without .contiguous() on
the logits (median of 50 forwards between CUDA events after 10 warm-ups).
"""
import argparse
import statistics

import torch

from conv_peer import graph_times  # scripts/gpu_tools/, beside this file


def timed(fn):
    ts = graph_times(fn, reps=20, calls=20, warm=10)
    return statistics.median(ts), min(ts), max(ts)


def compiled_gpt2(batch):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config()).to("cuda", torch.bfloat16).eval()
    f = torch.compile(m, mode="reduce-overhead")
    xs = [torch.randint(0, 50257, (batch, 128), device="cuda") for _ in range(4)]
    with torch.no_grad():
        for i in range(10):
            out = f(xs[i % 4]).logits
        torch.cuda.synchronize()
        print(f"compiled GPT-2 b{batch}: logits {tuple(out.shape)} strides {out.stride()} "
              f"contiguous {out.is_contiguous()}")
        for label, post in (("as returned", lambda t: t), ("contiguous()", lambda t: t.contiguous())):
            ts = []
            for i in range(50):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                post(f(xs[i % 4]).logits)
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            ts.sort()
            print(f"  logits {label:13s} median {statistics.median(ts):.3f} ms "
                  f"(p10 {ts[5]:.3f}, p90 {ts[45]:.3f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiled-gpt2", type=int, default=0, metavar="B")
    ap.add_argument("--rows", default="128,2048")
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    a = ap.parse_args()
    if a.compiled_gpt2:
        return compiled_gpt2(a.compiled_gpt2)
    v, k = a.vocab, a.k
    vp = (v + 7) // 8 * 8
    w = torch.randn(v, k, device="cuda", dtype=torch.bfloat16) * 0.05
    wp = torch.zeros(vp, k, device="cuda", dtype=torch.bfloat16)
    wp[:v] = w
    print(f"{'M':>6} {'odd pitch us':>13} {'padded us':>10} {'padded+copy us':>15} {'TFLOP/s odd':>12}")
    for m in (int(t) for t in a.rows.split(",")):
        xs = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
        out = torch.empty(m, v, device="cuda", dtype=torch.bfloat16)
        outp = torch.empty(m, vp, device="cuda", dtype=torch.bfloat16)
        odd = timed(lambda i: torch.matmul(xs[i % 4], w.t(), out=out))
        pad = timed(lambda i: torch.matmul(xs[i % 4], wp.t(), out=outp))
        both = timed(lambda i: (torch.matmul(xs[i % 4], wp.t(), out=outp), out.copy_(outp[:, :v])))
        assert torch.allclose(out.float(), outp[:, :v].float(), rtol=2e-2, atol=2e-2)
        tf = 2.0 * m * v * k / (odd[0] * 1e-6) / 1e12
        print(f"{m:>6} {odd[0]:>13.1f} {pad[0]:>10.1f} {both[0]:>15.1f} {tf:>12.0f}"
              f"   (spread odd {odd[1]:.1f}-{odd[2]:.1f}, padded+copy {both[1]:.1f}-{both[2]:.1f})")


if __name__ == "__main__":
    main()
