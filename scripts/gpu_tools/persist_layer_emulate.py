#!/usr/bin/env python3
"""Emulates persist_layer.cu's index math without a GPU, lane by lane in mma.m16n8k16's fragment layout:
the attention item's K and V^T staging (from the partials mode's qk/vt buffers and from the red mode's
float32 sums: the two must agree), its Q K^T and P V fragments from the padded shared rows, the
regrouping of P's accumulators into A fragments, and the red mode's FFN-down A fragments read from the
float32 sum; the finishing steps' mappings (FFN up's packed A words, V's transposed tiles) and
the A ring's fragment reads. Then the item schedule: every CTA walks its items in order (Walk), each waiting on
its counter as the kernel does; every item must run once and all must finish (no deadlock), in both
modes and the fold mode, for several K splits and grid sizes, and in cluster mode (a GEMM item done
only when its cluster's CTAs all reach it; the finish's row parts cover each row once). Then the fold mode's numerics (LayerNorm
statistics as sums and sums of squares) against the two-pass LayerNorm over 12 layers in numpy.
Run: .venv/bin/python scripts/gpu_tools/persist_layer_emulate.py (prints five oks).
The schedules are checked with PL_DEPS=fine's per-piece waits too."""
import numpy as np
rng=np.random.default_rng(1)
kM,kD,kHD,kQKV,kF=128,768,64,2304,3072
kKRow,kVRow=72,136
def frag_A(getA):  # getA(row, col) -> value; returns A 16x16 assembled from lanes
    A=np.zeros((16,16))
    for lane in range(32):
        g,t=lane//4,lane%4
        regs=[(g,2*t),(g+8,2*t),(g,2*t+8),(g+8,2*t+8)]
        for e,(r,c) in enumerate(regs):
            v0,v1=getA(lane,e)
            A[r,c]=v0; A[r,c+1]=v1
    return A
def mma(C,A,B):  # C 16x8 += A 16x16 @ B 16x8
    return C+A@B
def frag_B(getB):  # getB(lane, reg) -> (v0,v1) for k rows 2t,2t+1 (+8), col g
    B=np.zeros((16,8))
    for lane in range(32):
        g,t=lane//4,lane%4
        v0,v1=getB(lane,0); B[2*t,g]=v0; B[2*t+1,g]=v1
        v0,v1=getB(lane,1); B[2*t+8,g]=v0; B[2*t+9,g]=v1
    return B
qkv=rng.standard_normal((kM,kQKV)).astype(np.float32)
hd=5
# smem staging, red mode: K rows (key*72 + d), V^T (dim*136 + key)
att=np.zeros(kM*kKRow+kHD*kVRow)
for t in range(256):
    for i in range(8):
        e=t+256*i; key=e//16; part=e%16
        row=key*kQKV+hd*kHD+part*4
        kv=qkv.reshape(-1)[row+kD:row+kD+4]; vv=qkv.reshape(-1)[row+2*kD:row+2*kD+4]
        att[key*kKRow+part*4:key*kKRow+part*4+4]=kv
        for j in range(4): att[kM*kKRow+(part*4+j)*kVRow+key]=vv[j]
# partials-mode staging from qk [128][1536] and vt [768][128]
qk=np.concatenate([qkv[:,:kD],qkv[:,kD:2*kD]],axis=1)  # row-major 1536
vt=qkv[:,2*kD:].T.copy()  # [768][128]
att2=np.zeros_like(att)
for t in range(256):
    for i in range(4):
        e=t+256*i; key=e//8; part=e%8; dim=e//16; kp=e%16
        src=qk.reshape(-1)[key*2*kD+kD+hd*kHD+part*8: key*2*kD+kD+hd*kHD+part*8+8]
        att2[key*kKRow+part*8:key*kKRow+part*8+8]=src
        src=vt.reshape(-1)[(hd*kHD+dim)*kM+kp*8:(hd*kHD+dim)*kM+kp*8+8]
        att2[kM*kKRow+dim*kVRow+kp*8:kM*kKRow+dim*kVRow+kp*8+8]=src
assert np.array_equal(att,att2), "the two stagings differ"
words=lambda arr,w: (arr[2*w],arr[2*w+1])
for w in range(8):
    r0=w*16
    S=np.zeros((16,kM))
    for n in range(16):
        C=np.zeros((16,8))
        for kb in range(4):
            A=frag_A(lambda lane,e: (lambda g,t: (qkv[r0+g+8*(e&1),hd*kHD+kb*16+8*(e>>1)+2*t],qkv[r0+g+8*(e&1),hd*kHD+kb*16+8*(e>>1)+2*t+1]))(lane//4,lane%4))
            def gb(lane,reg,n=n,kb=kb):
                g,t=lane//4,lane%4; key=n*8+g; c=key*(kKRow//2)+kb*8+t+4*reg
                return words(att,c)
            C=mma(C,A,frag_B(gb))
        S[:,n*8:n*8+8]=C
    want=qkv[r0:r0+16,hd*kHD:hd*kHD+64]@qkv[:,kD+hd*kHD:kD+hd*kHD+64].T
    assert np.allclose(S,want,atol=1e-3),"S"
    P=np.exp(S-S.max(1,keepdims=True))
    O=np.zeros((16,64))
    for j in range(8):
        C=np.zeros((16,8))
        for kk in range(8):
            A=P[:,kk*16:kk*16+16]  # the accumulators of n-tiles 2kk, 2kk+1 regrouped: checked by layout below
            def gb(lane,reg,j=j,kk=kk):
                g,t=lane//4,lane%4; row=(j*8+g)*(kVRow//2)
                return words(att[kM*kKRow:],row+kk*8+4*reg+t)
            C=mma(C,A,frag_B(gb))
        O[:,j*8:j*8+8]=C
    assert np.allclose(O,P@qkv[:,2*kD+hd*kHD:2*kD+hd*kHD+64],atol=1e-2),"O"
# P regrouping: accumulator tile n (c0,c1 at (g,2t..), c2,c3 at (g+8,2t..)) -> A fragment of k16 block kk
for kk in range(8):
    acc=lambda n,lane,i: (lambda g,t: S_[ [g,g,g+8,g+8][i], n*8+2*t+(i%2)])(lane//4,lane%4)
    S_=rng.standard_normal((16,128))
    A=frag_A(lambda lane,e: [(acc(2*kk,lane,0),acc(2*kk,lane,1)),(acc(2*kk,lane,2),acc(2*kk,lane,3)),(acc(2*kk+1,lane,0),acc(2*kk+1,lane,1)),(acc(2*kk+1,lane,2),acc(2*kk+1,lane,3))][e])
    assert np.array_equal(A,S_[:,kk*16:kk*16+16]),"P regroup"
# FFN down A from u_acc: rows r0+gid+8*(e&1), cols k0+kk*16+8*(e>>1)+2*tig
u=rng.standard_normal((kM,kF))
for w in (0,7):
    for k0 in (0,192,3008):
        for kk in range(4):
            A=frag_A(lambda lane,e: (lambda g,t:(u[w*16+g+8*(e&1),k0+kk*16+8*(e>>1)+2*t],u[w*16+g+8*(e&1),k0+kk*16+8*(e>>1)+2*t+1]))(lane//4,lane%4))
            assert np.array_equal(A,u[w*16:w*16+16,k0+kk*16:k0+kk*16+16]),"FFN down A"
print("fragments ok")

# ---- the item schedule ----
kM,kD,kH,kF=128,768,12,3072; kQKV=3*kD; kLn=16
def shapes(sp): return [(kQKV,kD,sp[0]),(kD,kD,sp[1]),(kF,kD,sp[2]),(kD,kF,sp[3])]
def gemm_items(g,sp): n,k,s=shapes(sp)[g]; return n//64*s
def phase_items(p,sp,L=0,layers=1,fold=False):  # fold: no LayerNorm items but the last layer's LN2
    if fold and (p==3 or (p==6 and L+1<layers)): return 0
    return [gemm_items(0,sp),kH,gemm_items(1,sp),kLn,gemm_items(2,sp),gemm_items(3,sp),kLn][p]
def phase_gemm(p): return {0:0,2:1,4:2,5:3}.get(p,-1)
def phase_tiles(p): return (kQKV if p==0 else kF if p==4 else kD)//64
def walk(cta,G,layers,sp,fold=False):
    rot=0
    for L in range(layers):
        for p in range(7):
            n=phase_items(p,sp,L,layers,fold); i=((cta-rot)%G+G)%G
            while i<n: yield (L,p,i); i+=G
            rot=(rot+n)%G
# PL_DEPS=fine: attention head h waits for its Q/K/V tiles (h, 12+h, 24+h), an out-projection item
# for the heads of its K slice, an FFN down item for the FFN up tiles of its K slice; each finished
# tile (or head) bumps its own counter (per CTA part in cluster mode: wanting S).
def fine_dep(L,p,i,sp,cs=0):
    if p==1: return [((L,'qkv',t),sp[0] if cs else 1) for t in (i,12+i,24+i)]
    if p in (2,5):
        g=phase_gemm(p); N,K,S=shapes(sp)[g]; kc=K//S//64; sl=i//(N//64)
        if p==2: return [((L,'head',h),1) for h in range(sl*kc,sl*kc+kc)]
        return [((L,'up',t),sp[2] if cs else 1) for t in range(sl*kc,sl*kc+kc)]
    return None
def fine_piece(L,p,nt):
    return {0:(L,'qkv',nt),1:(L,'head',nt),4:(L,'up',nt)}.get(p)
def sim(G,layers,sp,red,fold=False,fine=False):
    seqs=[list(walk(c,G,layers,sp,fold)) for c in range(G)]
    # every item exactly once
    allit=sorted(x for s in seqs for x in s)
    exp=sorted((L,p,i) for L in range(layers) for p in range(7) for i in range(phase_items(p,sp,L,layers,fold)))
    assert allit==exp
    pc={}; tc={}; pos=[0]*G
    def ok(L,p,i):
        if fine:
            d=fine_dep(L,p,i,sp)
            if d is not None: return all(pc.get(k,0)>=w for k,w in d)
        w=want(L,p)
        return not (w and pc.get(w[0],0)<w[1])
    def want(L,p):
        if p==0 and fold: return None if L==0 else ((L-1,5),phase_tiles(5))
        if p==4 and fold: return ((L,2),phase_tiles(2))
        if p==0: return None if L==0 else ((L-1,6),kLn)
        if red: w=phase_items(p-1,sp)
        else: w=[None,phase_tiles(0),kH,phase_tiles(2),kLn,phase_tiles(4),phase_tiles(5)][p]
        return ((L,p-1),w)
    progress=True
    while progress:
        progress=False
        for c in range(G):
            while pos[c]<len(seqs[c]):
                L,p,i=seqs[c][pos[c]]
                if not ok(L,p,i): break
                g=phase_gemm(p)
                if g>=0 and not red:
                    n,k,s=shapes(sp)[g]; tiles=n//64; nt=i%tiles
                    tc[(L,g,nt)]=tc.get((L,g,nt),0)+1
                    if tc[(L,g,nt)]==s:
                        pc[(L,p)]=pc.get((L,p),0)+1
                        if fine and fine_piece(L,p,nt): pc[fine_piece(L,p,nt)]=pc.get(fine_piece(L,p,nt),0)+1
                else:
                    pc[(L,p)]=pc.get((L,p),0)+1
                    if fine and p==1: pc[fine_piece(L,p,i)]=pc.get(fine_piece(L,p,i),0)+1
                pos[c]+=1; progress=True
    done=all(pos[c]==len(seqs[c]) for c in range(G))
    # final counters equal their expected values
    return done, pc.get((layers-1,6),0)
# The finishing steps' mappings (finish_packed_up, finish_qkv's V tiles, the A ring's fragment
# reads), thread by thread as the kernel computes its addresses, against mma.m16n8k16's A fragment
# layout (frag_A, from the PTX ISA) and the plain transpose.
def packed_a(r,c):
    lane=(r%8)*4+(c%8)//2; e=((c%16)//8)*2+(r%16)//8
    return ((c//16*8+r//16)*32+lane)*8+2*e+(c%2)
U=rng.standard_normal((kM,kF)).astype(np.float32)  # an FFN-up tile's summed, biased values (all tiles)
ua=np.full(kM*kF,np.nan)
for nt in range(kF//64):
    for t in range(256):
        cb,rp,rb=t%4,(t//4)%8,t//32
        r,c=16*rb+rp,nt*64+16*cb
        at=lambda row8,col: U[r+8*row8,c+col]
        for j in range(4):
            w=packed_a(r,c+2*j)//8
            ua[8*w:8*w+8]=[at(0,2*j),at(0,2*j+1),at(1,2*j),at(1,2*j+1),at(0,8+2*j),at(0,9+2*j),at(1,8+2*j),at(1,9+2*j)]
assert not np.isnan(ua).any(), "finish_packed_up leaves words unwritten"
for cblk in range(0,kF//16,37):
    for rblk in range(8):
        blk=ua[(cblk*8+rblk)*32*8:(cblk*8+rblk+1)*32*8]
        A=frag_A(lambda lane,e: (blk[lane*8+2*e],blk[lane*8+2*e+1]))
        assert np.array_equal(A,U[16*rblk:16*rblk+16,16*cblk:16*cblk+16]),("finish_packed_up",cblk,rblk)
V=rng.standard_normal((kM,kD)).astype(np.float32)  # V's columns of the Q/K/V sums
vt_=np.full(kD*kM,np.nan)
for nt in range(2*kD//64,kQKV//64):
    for t in range(256):
        col,r0=nt*64+t%64,(t//64)*32
        vt_[(col-2*kD)*kM+r0:(col-2*kD)*kM+r0+32]=V[r0:r0+32,col-2*kD]
assert np.array_equal(vt_,V.T.reshape(-1)),"finish_qkv's V tiles"
# The A ring: chunk c of a K slice sl is the 16 KB at (sl*kc+c)*16384 bytes of the packed operand,
# and the consumers read word (kk*8+w)*32+lane of it: the same word as the direct loads'
# ap + (c*4+kk)*8*32 with ap = (sl*kc*4*8+w)*32+lane (uint4 units).
for kc,sl in ((4,2),(6,1),(2,5)):
    for c in range(kc):
        for kk in range(4):
            for w in range(8):
                for lane in (0,13,31):
                    ring=(sl*kc+c)*16384//16+(kk*8+w)*32+lane
                    direct=(sl*kc*4*8+w)*32+lane+(c*4+kk)*8*32
                    assert ring==direct,(kc,sl,c,kk,w,lane)
print("finish mappings ok")

for sp in [(4,12,3,12),(3,6,2,8),(2,4,1,4),(1,1,1,1)]:
    for red,fold,fine in ((False,False,False),(True,False,False),(False,True,False),(False,False,True)):
        for G in (132,114,1,7):
            d,f=sim(G,12,sp,red,fold,fine)
            assert d and f==kLn,(sp,red,fold,fine,G,d,f)
print("schedule ok")

# Cluster mode (PL_CLUSTER=cs): Walk's cluster numbering of a GEMM's items, and the schedule with a
# GEMM item finishing only when every CTA of its cluster has reached it (the red_full mbarrier),
# each CTA then signalling for its rows (a counter wants tiles x S). Every item once, no deadlock.
def walk_cl(cta,G,layers,sp,cs):
    rot=0
    for L in range(layers):
        for p in range(7):
            n=phase_items(p,sp,L,layers); g=phase_gemm(p)
            if g>=0:
                N,K,S=shapes(sp)[g]; tiles=N//64; T=cs//S; r=cta%cs; ci=cta//cs
                while ci<tiles//T:
                    yield (L,p,(r%S)*tiles+ci*T+r//S); ci+=G//cs
            else:
                i=((cta-rot)%G+G)%G
                while i<n: yield (L,p,i); i+=G
            rot=(rot+n)%G
def sim_cl(G,layers,sp,cs,fine=False):
    seqs=[list(walk_cl(c,G,layers,sp,cs)) for c in range(G)]
    allit=sorted(x for q in seqs for x in q)
    exp=sorted((L,p,i) for L in range(layers) for p in range(7) for i in range(phase_items(p,sp,L,layers)))
    assert allit==exp,"cluster walk: items not each once"
    pc={}; pos=[0]*G
    def want(L,p):
        if p==0: return None if L==0 else ((L-1,6),kLn)
        w=[None,phase_tiles(0),kH,phase_tiles(2),kLn,phase_tiles(4),phase_tiles(5)][p]
        if phase_gemm(p-1)>=0: w*=shapes(sp)[phase_gemm(p-1)][2]
        return ((L,p-1),w)
    def ready(c):
        if pos[c]>=len(seqs[c]): return None
        L,p,i=seqs[c][pos[c]]
        d=fine_dep(L,p,i,sp,cs) if fine else None
        if d is not None: return (L,p,i) if all(pc.get(k,0)>=w for k,w in d) else None
        w=want(L,p)
        return None if (w and pc.get(w[0],0)<w[1]) else (L,p,i)
    progress=True
    while progress:
        progress=False
        for c in range(G):
            while True:
                it=ready(c)
                if it is None: break
                L,p,i=it
                if phase_gemm(p)<0:
                    pc[(L,p)]=pc.get((L,p),0)+1; pos[c]+=1; progress=True
                    if fine and p==1: pc[fine_piece(L,p,i)]=pc.get(fine_piece(L,p,i),0)+1
                    continue
                k=c//cs; its=[ready(q) for q in range(k*cs,k*cs+cs)]
                if any(x is None or x[:2]!=(L,p) for x in its): break
                N,K,S=shapes(sp)[phase_gemm(p)]; tiles=N//64
                assert len({(x[2]%tiles)//(cs//S) for x in its})==1,"a cluster's CTAs on different cluster items"
                for q in range(k*cs,k*cs+cs):
                    pc[(L,p)]=pc.get((L,p),0)+1; pos[q]+=1
                    fp=fine_piece(L,p,seqs[q][pos[q]-1][2]%tiles) if fine else None
                    if fp: pc[fp]=pc.get(fp,0)+1
                progress=True
    return all(pos[c]==len(seqs[c]) for c in range(G)), pc.get((layers-1,6),0)
for cs,sp in ((4,(2,4,2,4)),(4,(4,4,4,4)),(4,(1,2,1,4)),(2,(2,2,2,2)),(2,(1,2,1,2)),(8,(2,4,2,8)),(8,(4,2,2,8))):
    for G in (132,128,8,4):
        if G<cs: continue
        for fine in (False,True):
            d,f=sim_cl(G//cs*cs,12,sp,cs,fine)
            assert d and f==kLn,(cs,sp,G,fine,d,f)
# The cluster finish's parts pi of pn (pn = S) cover every row of a tile once: finish_rows and
# finish_qkv's Q/K rows t/16 + 16i for 8pi/pn <= i < 8(pi+1)/pn; finish_packed_up's rows of warps
# 8pi/pn <= rb < 8(pi+1)/pn; V's 32-row groups 4pi/pn <= t/64 < 4(pi+1)/pn.
for pn in (1,2,4,8):
    rows=[[],[],[]]
    for pi in range(pn):
        for t in range(256):
            rows[0]+=[(t//16+16*i,t%16) for i in range(8*pi//pn,8*(pi+1)//pn)]
            rb,rp,cb=t//32,(t//4)%8,t%4
            if 8*pi//pn<=rb<8*(pi+1)//pn: rows[1]+=[(16*rb+rp,cb),(16*rb+rp+8,cb)]
            if pn<=4 and 4*pi//pn<=t//64<4*(pi+1)//pn: rows[2]+=[((t//64)*32+i,t%64) for i in range(32)]
    assert sorted(rows[0])==sorted((r,c) for r in range(128) for c in range(16)),("rows",pn)
    assert sorted(rows[1])==sorted((r,c) for r in range(128) for c in range(4)),("packed_up",pn)
    assert pn>4 or sorted(rows[2])==sorted((r,c) for r in range(128) for c in range(64)),("V",pn)
print("cluster schedule ok")

# Fold mode's numerics: LayerNorm statistics as a sum and a sum of squares over 64-column tiles
# (E[x^2] - mean^2, float32), normalized where the output is read, against the two-pass LayerNorm
# of the reference; 12 layers of the harness's kind of weights, bf16 rounding where the kernel
# stores 16 bits. The fold's result must stay as close to the reference as the check demands.
def bf16(x):
    x=np.asarray(x,np.float32); u=x.view(np.uint32).astype(np.uint64)
    u=((u+0x7FFF+((u>>16)&1))>>16)<<16
    return u.astype(np.uint32).view(np.float32)
def gelu(x):
    from math import erf
    return (0.5*x*(1+np.vectorize(erf)(x/np.sqrt(2)))).astype(np.float32)
def ln_two_pass(h,g,b):
    m=h.mean(1,keepdims=True,dtype=np.float32); v=((h-m)**2).mean(1,keepdims=True,dtype=np.float32)
    return bf16((h-m)/np.sqrt(v+1e-12)*g+b)
def ln_fold(h,g,b):
    s1=np.zeros((kM,1),np.float32); s2=np.zeros((kM,1),np.float32)
    for t in range(0,kD,64):
        s1+=h[:,t:t+64].sum(1,keepdims=True,dtype=np.float32); s2+=(h[:,t:t+64]**2).sum(1,keepdims=True,dtype=np.float32)
    m=s1/kD; v=np.maximum(s2/kD-m*m,0)
    return bf16((h-m)/np.sqrt(v+1e-12)*g+b)
def encoder(ln,layers=12):
    r=np.random.default_rng(7)
    x=bf16(r.uniform(-1,1,(kM,kD)))
    for L in range(layers):
        W=[bf16(r.uniform(-1,1,(k,n))*1.7/np.sqrt(k)) for n,k in ((kQKV,kD),(kD,kD),(kF,kD),(kD,kF))]
        B=[bf16(r.uniform(-.1,.1,n)) for n in (kQKV,kD,kF,kD)]
        G=[bf16(1+r.uniform(-.1,.1,kD)) for _ in range(2)]; Be=[bf16(r.uniform(-.1,.1,kD)) for _ in range(2)]
        qkv=bf16(x@W[0]+B[0]); o=np.zeros((kM,kD),np.float32)
        for h in range(kH):
            q,k,v=(qkv[:,j*kD+h*kHD:j*kD+(h+1)*kHD] for j in range(3))
            s=q@k.T/8; p=np.exp(s-s.max(1,keepdims=True)); o[:,h*kHD:(h+1)*kHD]=bf16(p@v/p.sum(1,keepdims=True))
        y=ln(o@W[1]+B[1]+x,G[0],Be[0])
        u=bf16(gelu(y@W[2]+B[2]))
        x=ln(u@W[3]+B[3]+y,G[1],Be[1])
    return x
def ln_two_pass64(h,g,b):  # the same LayerNorm with its statistics in float64: the size of a harmless perturbation
    h64=h.astype(np.float64); m=h64.mean(1,keepdims=True); v=((h64-m)**2).mean(1,keepdims=True)
    return bf16(((h64-m)/np.sqrt(v+1e-12)*g+b).astype(np.float32))
rl=lambda a,b: float(np.sqrt(((a-b)**2).sum()/(b**2).sum()))
ref=encoder(ln_two_pass)
rel,noise=rl(encoder(ln_fold),ref),rl(encoder(ln_two_pass64),ref)
# bf16 stores turn any change of the statistics' last bits into rounding flips that the 12 layers
# carry on: the fold's difference must be of the size of the float64 statistics' and within the
# harness's 0.02.
assert rel<0.02 and rel<3*noise,(rel,noise)
print(f"fold numerics ok (rel L2 {rel:.2g} after 12 layers against the two-pass LayerNorm; float64 statistics: {noise:.2g})")
