#!/usr/bin/env python3
"""The direct conv kernel (src/backend/cuda/device/conv_direct.cuh) emulated on the CPU.

For sessions without a GPU: the kernel's index math (the tap offsets, the region and weight
layouts in shared memory, each lane's ldmatrix row address, the tiles a CTA strides over, the
epilogue's pixel and channel per accumulator) written out line for line in numpy, with PTX's
semantics for ldmatrix.x4 (lanes 8i..8i+7 give matrix i's row addresses; lane t gets row t/4,
columns 2(t%4), +1 of each) and mma.m16n8k16.row.col (the fragment layouts of the PTX ISA, the same
the attention and small-M GEMM kernels rely on), checked against a float64 convolution over
stems and odd geometries. It checks the addressing, not the hardware: the device test
CudaConvDirect.KernelMatchesAFloat64Convolution is the real check. Keep it in step with the
kernel when the kernel changes.
Run: .venv/bin/python scripts/gpu_tools/conv_direct_emulate.py   (numpy; about a minute)
"""
import numpy as np, itertools, sys
TH, TW = 4, 16
def plan(n,c,h,w,k,kh,kw,sh,sw,ph,pw,dh,dw):  # conv_direct_plan (src/backend/cuda/conv_direct.cpp)
    oh=(h+2*ph-dh*(kh-1)-1)//sh+1; ow=(w+2*pw-dw*(kw-1)-1)//sw+1
    pairs=c<=4 and dw==1 and sw%2==0
    cpp=4 if pairs else 8; gpr=(kw+1)//2 if pairs else kw; groups=kh*gpr; ks=(groups+1)//2
    rh=(TH-1)*sh+(kh-1)*dh+1; rw=(TW-1)*sw+(kw-1)*dw+1
    if pairs: rw=(rw+kw%2+1)//2*2
    bands=(oh+TH-1)//TH; tiles_w=(ow+TW-1)//TW
    return dict(n=n,c=c,h=h,w=w,k=k,oh=oh,ow=ow,kh=kh,kw=kw,sh=sh,sw=sw,ph=ph,pw=pw,dh=dh,dw=dw,cpp=cpp,gpr=gpr,groups=groups,ks=ks,rh=rh,rw=rw,bands=bands,tiles_w=tiles_w,tiles=n*bands*tiles_w)
def pack(W,g):  # conv_direct_weights
    k,c,kh,kw=W.shape; row=g['ks']*16; P=np.zeros((k,row))
    for kk,grp,slot in itertools.product(range(k),range(g['groups']),range(8)):
        i=grp//g['gpr']; jj=grp%g['gpr']
        j=2*jj+slot//4 if g['cpp']==4 else jj; ch=slot%g['cpp']
        if j<kw and ch<c: P[kk,grp*8+slot]=W[kk,ch,i,j]
    return P
def ldsm4(S, addrs):  # addrs[lane] element index of row start; returns regs[lane][4][2]
    r=np.zeros((32,4,2))
    for t in range(32):
        for i in range(4):
            base=addrs[8*i+t//4]; r[t,i]=S[base+2*(t%4):base+2*(t%4)+2]
    return r
def mma(acc,a,b0,b1):  # acc[32][4]
    A=np.zeros((16,16)); B=np.zeros((16,8))
    for t in range(32):
        g,q=t//4,t%4
        A[g,2*q:2*q+2]=a[t,0]; A[g+8,2*q:2*q+2]=a[t,1]; A[g,2*q+8:2*q+10]=a[t,2]; A[g+8,2*q+8:2*q+10]=a[t,3]
        B[2*q:2*q+2,g]=b0[t]; B[2*q+8:2*q+10,g]=b1[t]
    C=A@B
    for t in range(32):
        g,q=t//4,t%4
        acc[t,0:2]+=C[g,2*q:2*q+2]; acc[t,2:4]+=C[g+8,2*q:2*q+2]
def kernel(x,P,bias,g,grid,act):
    y=np.full((g['n'],g['oh'],g['ow'],g['k']),np.nan)
    wst=g['ks']*16+8; krows=(g['k']+15)//16*16
    for blk in range(grid):
        SW=np.zeros(krows*wst); 
        for r in range(g['k']): SW[r*wst:r*wst+g['ks']*16]=P[r]
        cpp=g['cpp']; plane=g['rh']*g['rw']; SX=np.zeros(plane*cpp+8)  # region + zero row
        zero_e=plane*cpp
        def off_of(t):  # element offsets (byte offsets / 2); bit 0 of the byte offset: masked
            if t>=g['groups']: return -1,True
            i=t//g['gpr']; jj=t%g['gpr']; j=2*jj if cpp==4 else jj
            return (i*g['dh']*g['rw']+j*g['dw'])*cpp, cpp==4 and j+1>=g['kw']
        tap_off=[off_of(t) for t in range(2*g['ks'])]
        for tile in range(blk,g['tiles'],grid):
            tw=tile%g['tiles_w']; rest=tile//g['tiles_w']; band=rest%g['bands']; img=rest//g['bands']
            oh0=band*TH; ow0=tw*TW; ih0=oh0*g['sh']-g['ph']; iw0=ow0*g['sw']-g['pw']
            for e in range(g['c']*plane):
                ch=e//plane; p=e-ch*plane; rr=p//g['rw']; cc=p-rr*g['rw']; ih=ih0+rr; iw=iw0+cc
                v=x[img,ch,ih,iw] if 0<=ih<g['h'] and 0<=iw<g['w'] else 0
                SX[p*cpp+ch]=v
            S=np.concatenate([SW,SX]); sxo=len(SW)
            for warp in range(4):
                lanes=np.arange(32); q=lanes>>3; r8=lanes&7
                apix=r8+(q&1)*8; ahalf=q>>1
                abase=sxo+(warp*g['sh']*g['rw']+apix*g['sw'])*cpp
                bbase=(((q>>1)*8+r8)*wst+(q&1)*8)
                oh=oh0+warp
                for n0 in range(0,g['k'],64):
                    nt=min(8,(g['k']-n0)>>3); acc=np.zeros((8,32,4))
                    bchunk=bbase+n0*wst
                    for s in range(g['ks']):
                        offs=np.array([tap_off[2*s+h][0] for h in ahalf])
                        addrs=np.where(offs>=0,abase+offs,sxo+zero_e)
                        a=ldsm4(S,addrs)
                        for lane in range(32):
                            if lane&2:
                                if tap_off[2*s][1]: a[lane,0]=a[lane,1]=0
                                if tap_off[2*s+1][1]: a[lane,2]=a[lane,3]=0
                        for jj in range(4):
                            if 2*jj<nt:
                                b=ldsm4(S,bchunk+jj*16*wst+s*16)
                                mma(acc[2*jj],a,b[:,0],b[:,1])
                                if 2*jj+1<nt: mma(acc[2*jj+1],a,b[:,2],b[:,3])
                    if oh<g['oh']:
                        for j in range(nt):
                            for lane in range(32):
                                ch=n0+j*8+2*(lane&3)
                                b0=bias[ch] if bias is not None else 0; b1=bias[ch+1] if bias is not None else 0
                                for hf in range(2):
                                    ow=ow0+(lane>>2)+hf*8
                                    if ow<g['ow']:
                                        v=[acc[j,lane,2*hf]+b0,acc[j,lane,2*hf+1]+b1]
                                        if act==1: v=[max(0,u) for u in v]
                                        y[img,oh,ow,ch:ch+2]=v
    return y
def ref(x,W,bias,g,act):
    n,c,h,w=x.shape; k=W.shape[0]; y=np.zeros((n,g['oh'],g['ow'],k))
    for b,oy,ox in itertools.product(range(n),range(g['oh']),range(g['ow'])):
        acc=np.array(bias,dtype=float) if bias is not None else np.zeros(k)
        for i,j in itertools.product(range(g['kh']),range(g['kw'])):
            iy=oy*g['sh']-g['ph']+i*g['dh']; ix=ox*g['sw']-g['pw']+j*g['dw']
            if 0<=iy<h and 0<=ix<w: acc+=W[:,:,i,j]@x[b,:,iy,ix]
        y[b,oy,ox]=np.maximum(acc,0) if act==1 else acc
    return y
rng=np.random.default_rng(0)
cases=[(1,3,21,19,16,7,7,2,2,3,3,1,1,1),(2,1,9,20,8,5,5,1,1,4,4,2,2,0),(1,3,16,36,96,4,4,4,4,0,0,1,1,0),(1,8,6,6,24,3,3,1,1,1,1,1,1,1),(1,4,5,18,136,1,1,1,1,0,0,1,1,1),(1,2,5,5,40,7,7,3,2,3,3,1,1,1)]
cases.append((1,3,6,8,8,3,3,2,2,0,0,1,1,0))  # column 7 is under no window, only a masked tap
bad=False
for cs in cases:
    *geo,act=cs; g=plan(*geo)
    x=rng.uniform(-2,2,(g['n'],g['c'],g['h'],g['w']))
    W=rng.uniform(-.5,.5,(g['k'],g['c'],g['kh'],g['kw'])); bias=rng.uniform(-.5,.5,g['k'])
    if cs==cases[-1]: x[:,:,:,7]=np.inf
    P=pack(W,g)
    for grid in (min(g['tiles'],5),2):
        y=kernel(x,P,bias,g,grid,act); r=ref(x,W,bias,g,act)
        err=np.nanmax(np.abs(y-r)) if not np.isnan(y).any() else float('inf')
        print(cs,'grid',grid,'max err',err if np.isfinite(err) else 'NaN (unwritten, or an infinity times a zero weight)', flush=True)
        bad=bad or not err<1e-9
sys.exit(1 if bad else 0)
