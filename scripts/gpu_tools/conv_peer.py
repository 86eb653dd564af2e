"""PyTorch's (cuDNN's) time for single convolutions, the peer for one brrr conv kernel.

    python3 scripts/gpu_tools/conv_peer.py [--shapes CIN,COUT,HW,K,GROUPS[,STRIDE];...] [--batch 1]

Each shape at fp32 and bf16, NCHW and channels-last, plus the same 1x1 conv as a batched matmul
(W [Cout, Cin] x X [N, Cin, H*W]), or for a k x k conv F.unfold's columns and one matmul: per
call, the median over 20 replays of a CUDA graph of 50
calls between two CUDA events (one eager call per event pair measured PyTorch's host cost
instead, 28-47 us for every one of these shapes on an H100), after 20 warm-ups, inputs rotated
over 8 buffers (not zeros). Default shapes: ShuffleNetV2 x1.0's 1x1 and depthwise convs.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

DEFAULT = "24,58,56,1,1;58,58,28,1,1;58,58,28,3,58;116,116,14,1,1;116,116,14,3,116;232,232,7,1,1;464,1024,7,1,1"


def graph_times(fn, reps=20, calls=50, warm=20):
    """Microseconds per call of fn(i), one per replay of a CUDA graph of `calls` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-ups (cudnn.benchmark chooses here) off the capture
        for i in range(warm):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / calls)
    return ts


def timed(fn, reps=20, calls=50, warm=20):
    return statistics.median(graph_times(fn, reps, calls, warm))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=DEFAULT)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    print(f"{'cin,cout,hw,k,g':>20} {'dtype':>6} {'nchw us':>8} {'nhwc us':>8} {'matmul us':>9}")
    for s in a.shapes.split(";"):
        f = [int(t) for t in s.split(",")]
        cin, cout, hw, k, g = f[:5]
        st = f[5] if len(f) > 5 else 1
        for dt in (torch.float32, torch.bfloat16):
            xs = [torch.randn(a.batch, cin, hw, hw, device="cuda", dtype=dt) for _ in range(8)]
            w = torch.randn(cout, cin // g, k, k, device="cuda", dtype=dt) * 0.1
            bias = torch.randn(cout, device="cuda", dtype=dt)
            row = []
            for cl in (False, True):
                mf = torch.channels_last if cl else torch.contiguous_format
                xx = [x.contiguous(memory_format=mf) for x in xs]
                ww = w.contiguous(memory_format=mf)
                row.append(timed(lambda i: F.conv2d(xx[i % 8], ww, bias, st, k // 2, 1, g)))
            mm = float("nan")
            if k == 1 and g == 1 and st == 1:
                w2 = w.view(cout, cin)
                x3 = [x.view(a.batch, cin, hw * hw) for x in xs]
                mm = timed(lambda i: torch.matmul(w2, x3[i % 8]).add_(bias.view(1, cout, 1)))
            elif g == 1:  # im2col (F.unfold) and one matmul
                w2 = w.view(cout, -1)
                mm = timed(lambda i: torch.matmul(w2, F.unfold(xs[i % 8], k, padding=k // 2, stride=st)))
            print(f"{s:>20} {str(dt).split('.')[-1]:>6} {row[0]:8.1f} {row[1]:8.1f} {mm:9.1f}")


if __name__ == "__main__":
    main()
