#!/usr/bin/env python3
"""The flash attention kernel's fragment math without a GPU (src/backend/cuda/device/attention.cuh,
brrr_attention_flash_t): each lane's ldmatrix addresses, the Q, P and V fragments and the online
softmax, written as the kernel writes them, run against the PTX-defined layouts of ldmatrix
(.trans) and mma.m16n8k16 and compared with a plain softmax(Q K^T) V. A change to the kernel's
index math is checked here first; it says nothing of timing, races or PTX syntax (the device
tests, FusedAttentionCuda.*). Usage: python3 scripts/gpu_tools/attention_fragments.py
"""
import sys

import numpy as np
L = np.arange(32); GQ = L >> 2; TQ = L & 3

def mma(c, a, b0, b1):
    # a: [32][4] of pairs (2,), b0/b1: [32] pairs, c: [32][4]
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for l in range(32):
        g, t = GQ[l], TQ[l]
        A[g, 2*t:2*t+2] = a[l][0]; A[g+8, 2*t:2*t+2] = a[l][1]
        A[g, 2*t+8:2*t+10] = a[l][2]; A[g+8, 2*t+8:2*t+10] = a[l][3]
        B[2*t:2*t+2, g] = b0[l]; B[2*t+8:2*t+10, g] = b1[l]
    C = A @ B
    out = c.copy()
    for l in range(32):
        g, t = GQ[l], TQ[l]
        out[l] += [C[g, 2*t], C[g, 2*t+1], C[g+8, 2*t], C[g+8, 2*t+1]]
    return out

def ldsm4(tile, addr, trans):
    # tile: 2D [rows][LD]; addr[l] = element offset of the row lane l names
    LD = tile.shape[1]; flat = tile.reshape(-1)
    regs = [[None]*4 for _ in range(32)]
    for i in range(4):
        M = np.stack([flat[addr[8*i + r]: addr[8*i + r] + 8] for r in range(8)])
        for l in range(32):
            if not trans: regs[l][i] = M[l // 4, 2*(l % 4): 2*(l % 4) + 2]
            else: regs[l][i] = np.array([M[2*(l % 4), l // 4], M[2*(l % 4) + 1, l // 4]])
    return regs

def flash(Q, K, V, D, nw, scale, mask=None, causal=False):
    sq, sk = Q.shape[0], K.shape[0]
    BK = 64 if D == 64 else 32; LD = D + 8
    O = np.full((sq, D), np.nan)
    off = sk - sq
    for q0 in range(0, sq, 16 * nw):
        key_end = sk
        if causal:
            last = q0 + 16 * nw - 1 + off + 1
            if last < key_end: key_end = max(last, 0)
        tiles = (key_end + BK - 1) // BK
        for warp in range(nw):
            rows = [q0 + warp*16 + GQ, q0 + warp*16 + GQ + 8]
            qf = [[[None]*4 for _ in range(32)] for _ in range(D // 16)]
            for hf in range(2):
                for l in range(32):
                    i = rows[hf][l]
                    for kk in range(D // 16):
                        c0 = kk*16 + 2*TQ[l]
                        qf[kk][l][hf] = Q[i, c0:c0+2] if i < sq else np.zeros(2)
                        qf[kk][l][hf+2] = Q[i, c0+8:c0+10] if i < sq else np.zeros(2)
            m = np.full((32, 2), -np.inf); lsum = np.zeros((32, 2)); o = np.zeros((D // 8, 32, 4))
            k_row = L & 7; k_col = (L >> 3) * 8
            v_row = (L & 7) + ((L >> 3) & 1) * 8; v_col = (L >> 4) * 8
            for t in range(tiles):
                k0 = t * BK
                ks = np.zeros((BK, LD)); vs = np.zeros((BK, LD))
                n = min(BK, sk - k0)
                ks[:n, :D] = K[k0:k0+n]; vs[:n, :D] = V[k0:k0+n]
                s = np.zeros((BK // 8, 32, 4))
                for nt in range(BK // 8):
                    for kk in range(0, D // 16, 2):
                        kb = ldsm4(ks, (nt*8 + k_row) * LD + kk*16 + k_col, False)
                        s[nt] = mma(s[nt], qf[kk], [kb[l][0] for l in range(32)], [kb[l][1] for l in range(32)])
                        s[nt] = mma(s[nt], qf[kk+1], [kb[l][2] for l in range(32)], [kb[l][3] for l in range(32)])
                mx = np.full((32, 2), -np.inf)
                for nt in range(BK // 8):
                    for c in range(4):
                        for l in range(32):
                            i = rows[c >> 1][l]; j = k0 + nt*8 + 2*TQ[l] + (c & 1)
                            v = -np.inf
                            if i < sq and j < sk and not (causal and j > i + off):
                                v = s[nt][l][c] * scale + (mask[i, j] if mask is not None else 0)
                            s[nt][l][c] = v; mx[l][c >> 1] = max(mx[l][c >> 1], v)
                # quad reductions
                mxq = np.array([[mx[(l & ~3) + u][hf] for u in range(4)] for l in range(32) for hf in range(2)]).reshape(32, 2, 4).max(-1)
                mnew = np.maximum(m, mxq); base = np.where(mnew == -np.inf, 0, mnew)
                alpha = np.exp(m - base); m = mnew
                pf = [[[None]*4 for _ in range(32)] for _ in range(BK // 16)]
                ssum = np.zeros((32, 2))
                for nt in range(BK // 8):
                    for l in range(32):
                        p = np.exp(s[nt][l] - np.repeat(base[l], 2))
                        ssum[l] += [p[0] + p[1], p[2] + p[3]]
                        pf[nt // 2][l][(nt & 1)*2 + 0] = p[0:2]
                        pf[nt // 2][l][(nt & 1)*2 + 1] = p[2:4]
                sq4 = np.array([[ssum[(l & ~3) + u][hf] for u in range(4)] for l in range(32) for hf in range(2)]).reshape(32, 2, 4).sum(-1)
                lsum = lsum * alpha + sq4
                o[:, :, 0:2] *= alpha[None, :, 0:1]; o[:, :, 2:4] *= alpha[None, :, 1:2]
                for nt in range(0, D // 8, 2):
                    for kk in range(BK // 16):
                        vb = ldsm4(vs, (kk*16 + v_row) * LD + nt*8 + v_col, True)
                        o[nt] = mma(o[nt], pf[kk], [vb[l][0] for l in range(32)], [vb[l][1] for l in range(32)])
                        o[nt+1] = mma(o[nt+1], pf[kk], [vb[l][2] for l in range(32)], [vb[l][3] for l in range(32)])
            for hf in range(2):
                for l in range(32):
                    i = rows[hf][l]
                    if i >= sq: continue
                    inv = 1 / lsum[l][hf] if lsum[l][hf] > 0 else np.nan
                    for nt in range(D // 8):
                        d = nt*8 + 2*TQ[l]
                        O[i, d] = o[nt][l][hf*2] * inv; O[i, d+1] = o[nt][l][hf*2+1] * inv
    return O

def ref(Q, K, V, scale, mask=None, causal=False):
    S = Q @ K.T * scale
    if mask is not None: S = S + mask
    sq, sk = S.shape
    if causal:
        S = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq, -np.inf, S)
    P = np.exp(S - S.max(1, keepdims=True)); P /= P.sum(1, keepdims=True)
    return P @ V

rng = np.random.default_rng(0)
bad = 0
for (sq, sk, D, nw, msk, causal) in [(128, 128, 64, 1, True, False), (77, 77, 128, 2, True, False),
                                      (130, 130, 64, 4, False, True), (40, 200, 128, 1, False, True),
                                      (1, 1, 64, 1, False, False), (200, 200, 64, 2, True, True)]:
    Q = rng.uniform(-2, 2, (sq, D)); K = rng.uniform(-2, 2, (sk, D)); V = rng.uniform(-2, 2, (sk, D))
    mask = np.where(rng.uniform(size=(sq, sk)) < 0.15, -10000.0, 0.0) if msk else None
    got = flash(Q, K, V, D, nw, 1 / np.sqrt(D), mask, causal)
    want = ref(Q, K, V, 1 / np.sqrt(D), mask, causal)
    err = np.nanmax(np.abs(got - want))
    ok = err < 1e-9 and not np.isnan(got).any()
    bad += not ok
    print(f"seq_q {sq} seq_k {sk} d {D} warps {nw} mask {msk} causal {causal}: max abs err {err:.1e}"
          f" {'ok' if ok else 'WRONG'}")
sys.exit(1 if bad else 0)
