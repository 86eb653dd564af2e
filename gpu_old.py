# Device-side only (not committed): puts back the old primary-context release for an A/B run.
p='src/backend/cuda/cuda_runtime.cpp'; s=open(p).read()
s=s.replace('CUcontext ctx = process_primary_context(dev);','CUcontext ctx = nullptr;\n  BRRR_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev), "primary context");')
s=s.replace('Device::~Device() = default;','Device::~Device() {\n  if (const DriverApi* d = try_driver()) d->cuDevicePrimaryCtxRelease(dev_);\n}')
open(p,'w').write(s)
