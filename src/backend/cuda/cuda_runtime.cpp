#include "backend/cuda/cuda_runtime.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda/driver_api.hpp"
#include "brrr/error.hpp"
#include "core/pages.hpp"
#include "core/parallel.hpp"

namespace brrr::cuda {

bool cuda_device_available(std::string* reason) {
  try {
    return try_driver(reason) != nullptr;
  } catch (const std::exception& e) {  // belt and braces: never let detection throw
    if (reason) *reason = e.what();
    return false;
  }
}

// ---- Device ----

namespace {

// The device's primary context, retained once and never released, as the CUDA runtime and
// PyTorch do. Releasing it with the last Device destroyed the context between two sessions (the
// H200 showed it: CudaRuntime.PrimaryContextOutlivesEveryDevice), so every session paid context
// creation again and cuDNN's and cuBLASLt's per-context state was thrown away under them.
CUcontext process_primary_context(CUdevice dev) {
  static std::mutex mu;
  static std::map<CUdevice, CUcontext> retained;
  std::lock_guard<std::mutex> lock(mu);
  auto it = retained.find(dev);
  if (it != retained.end()) return it->second;
  CUcontext ctx = nullptr;
  BRRR_CU(driver().cuDevicePrimaryCtxRetain(&ctx, dev), "primary context");
  return retained[dev] = ctx;
}

}  // namespace

Device::Device(int ordinal) {
  const DriverApi& d = driver();
  int n = 0;
  BRRR_CU(d.cuDeviceGetCount(&n), "device count");
  BRRR_CHECK(ordinal >= 0 && ordinal < n, "CUDA device {} requested but {} present", ordinal, n);
  CUdevice dev;
  BRRR_CU(d.cuDeviceGet(&dev, ordinal), "device " + std::to_string(ordinal));
  dev_ = dev;
  CUcontext ctx = process_primary_context(dev);
  ctx_ = ctx;
  BRRR_CU(d.cuCtxSetCurrent(ctx), "primary context");

  info_.ordinal = ordinal;
  char name[256] = {};
  BRRR_CU(d.cuDeviceGetName(name, sizeof(name), dev), "device name");
  info_.name = name;
  auto attr = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    BRRR_CU(d.cuDeviceGetAttribute(&v, a, dev), what);
    return v;
  };
  info_.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  info_.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  info_.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
  info_.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size");
  info_.max_shared_per_block_optin =
      attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory limit");
  size_t total = 0;
  BRRR_CU(d.cuDeviceTotalMem(&total, dev), "total memory");
  info_.total_mem = total;
  BRRR_CU(d.cuDriverGetVersion(&info_.driver_version), "driver version");
}

// The primary context is retained for the life of the process (process_primary_context).
Device::~Device() = default;

bool primary_context_active(int ordinal) {
  CUdevice dev;
  BRRR_CU(driver().cuDeviceGet(&dev, ordinal), "device " + std::to_string(ordinal));
  unsigned flags = 0;
  int active = 0;
  BRRR_CU(driver().cuDevicePrimaryCtxGetState(dev, &flags, &active), "primary context state");
  return active != 0;
}

void Device::make_current() const {
  BRRR_CU(driver().cuCtxSetCurrent(static_cast<CUcontext>(ctx_)), "make context current");
}

void Device::synchronize() const { BRRR_CU(driver().cuCtxSynchronize(), "device synchronize"); }

std::size_t Device::free_bytes() const {
  size_t free = 0, total = 0;
  BRRR_CU(driver().cuMemGetInfo(&free, &total), "memory info");
  return free;
}

// ---- Stream / Event ----

Stream::Stream() { BRRR_CU(driver().cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING), "create stream"); }
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void Stream::synchronize(const std::string& where) const {
  BRRR_CU(driver().cuStreamSynchronize(s_), where);
}

void Stream::wait(const Event& e) const {
  BRRR_CU(driver().cuStreamWaitEvent(s_, e.get(), 0), "stream wait on event");
}

Event::Event() { BRRR_CU(driver().cuEventCreate(&e_, CU_EVENT_DEFAULT), "create event"); }
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(const Stream& s) { BRRR_CU(driver().cuEventRecord(e_, s.get()), "record event"); }
void Event::synchronize() { BRRR_CU(driver().cuEventSynchronize(e_), "event synchronize"); }
float Event::elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0;
  BRRR_CU(driver().cuEventElapsedTime(&ms, start.e_, stop.e_), "event elapsed time");
  return ms;
}

// ---- memory ----

DeviceBuffer::DeviceBuffer(std::size_t bytes, const std::string& what) : n_(bytes) {
  if (bytes == 0) return;
  const DriverApi& d = driver();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free = 0, total = 0;
    d.cuMemGetInfo(&free, &total);
    fail("CUDA out of memory allocating {} bytes ({:.2f} GiB) for {}: {:.2f} GiB free of {:.2f} GiB",
         bytes, bytes / 1073741824.0, what, free / 1073741824.0, total / 1073741824.0);
  }
  BRRR_CU(r, "allocate " + std::to_string(bytes) + " bytes for " + what);
  p_ = p;
}

void DeviceBuffer::release() noexcept {
  if (p_)
    if (const DriverApi* d = try_driver()) d->cuMemFree(p_);
  p_ = 0;
  n_ = 0;
}
DeviceBuffer::~DeviceBuffer() { release(); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : p_(std::exchange(o.p_, 0)), n_(std::exchange(o.n_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = std::exchange(o.p_, 0);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

DevPtr Arena::at(std::size_t offset, std::size_t bytes, const std::string& who) const {
  BRRR_CHECK(offset % kAlign == 0, "arena {}: offset {} for {} is not {}-byte aligned", what_,
             offset, who, kAlign);
  BRRR_CHECK(offset <= buf_.size() && bytes <= buf_.size() - offset,
             "arena {}: [{}, {}) for {} lies outside its {} bytes", what_, offset, offset + bytes,
             who, buf_.size());
  return buf_.ptr() + offset;
}

void copy_h2d(DevPtr dst, const void* src, std::size_t bytes, const Stream& s,
              const std::string& what) {
  if (bytes == 0) return;  // a zero-size tensor: its buffer may be a null pointer
  BRRR_CU(driver().cuMemcpyHtoDAsync(dst, src, bytes, s.get()), "copy to device: " + what);
}
StagedUpload::StagedUpload(std::size_t chunk_bytes) : chunk_(chunk_bytes) {
  for (void*& b : buf_)
    if (driver().cuMemHostAlloc(&b, chunk_, 0) != CUDA_SUCCESS) b = nullptr;
}

StagedUpload::~StagedUpload() {
  for (int i = 0; i < 2; ++i) {
    if (busy_[i]) driver().cuEventSynchronize(done_[i].get());  // the copy engine still reads it
    if (buf_[i]) driver().cuMemFreeHost(buf_[i]);
  }
}

void StagedUpload::copy(DevPtr dst, const void* src, std::size_t bytes, const Stream& s,
                        const std::string& what) {
  if (!buf_[0] || !buf_[1]) return copy_h2d(dst, src, bytes, s, what);
  const char* from = static_cast<const char*>(src);
  for (std::size_t off = 0; off < bytes; off += chunk_) {
    const int b = next_;
    next_ ^= 1;
    const std::size_t n = std::min(chunk_, bytes - off);
    if (busy_[b]) done_[b].synchronize();
    char* to = static_cast<char*>(buf_[b]);
    for_bands(int64_t(n), n, std::size_t(8) << 20, [&](int64_t i0, int64_t i1) {
      prefault_for_reading(from + off + size_t(i0), size_t(i1 - i0));
      std::memcpy(to + i0, from + off + size_t(i0), size_t(i1 - i0));
    });
    BRRR_CU(driver().cuMemcpyHtoDAsync(dst + off, to, n, s.get()), "copy to device: " + what);
    done_[b].record(s);
    busy_[b] = true;
  }
}

void copy_d2h(void* dst, DevPtr src, std::size_t bytes, const Stream& s, const std::string& what) {
  if (bytes == 0) return;
  BRRR_CU(driver().cuMemcpyDtoHAsync(dst, src, bytes, s.get()), "copy to host: " + what);
}
void copy_d2d(DevPtr dst, DevPtr src, std::size_t bytes, const Stream& s,
              const std::string& what) {
  if (bytes == 0) return;
  BRRR_CU(driver().cuMemcpyDtoDAsync(dst, src, bytes, s.get()), "device copy: " + what);
}
void copy_2d_d2d(DevPtr dst, std::size_t dst_pitch, DevPtr src, std::size_t src_pitch,
                 std::size_t width, std::size_t height, const Stream& s, const std::string& what) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = src_pitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = dst_pitch;
  c.WidthInBytes = width;
  c.Height = height;
  BRRR_CU(driver().cuMemcpy2DAsync(&c, s.get()), "2-D device copy: " + what);
}
void memset_u32(DevPtr dst, std::uint32_t value, std::size_t count, const Stream& s,
                const std::string& what) {
  BRRR_CU(driver().cuMemsetD32Async(dst, value, count, s.get()), "memset: " + what);
}

// ---- modules and launches ----

Module::Module(const std::vector<char>& cubin, const std::string& what) : what_(what) {
  BRRR_CU(driver().cuModuleLoadData(&m_, cubin.data()), "load module " + what);
}
Module::~Module() {
  if (m_) driver().cuModuleUnload(m_);
}
Function Module::function(const std::string& name) const {
  std::optional<Function> f = find(name);
  if (!f) fail("kernel '{}' not found in module {} (missing extern \"C\"?)", name, what_);
  return *f;
}
std::optional<Function> Module::find(const std::string& name) const {
  CUfunction f = nullptr;
  CUresult r = driver().cuModuleGetFunction(&f, m_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return std::nullopt;
  BRRR_CU(r, "get kernel " + name + " from " + what_);
  return Function(f, name);
}

void ModuleSet::add(const std::vector<char>& cubin, const std::string& what) {
  mods_.push_back(std::make_unique<Module>(cubin, what));
}
Function ModuleSet::function(const std::string& name) const {
  for (const auto& m : mods_)
    if (std::optional<Function> f = m->find(name)) return *f;
  fail("kernel '{}' not found in the model's {} module(s) (missing extern \"C\"?)", name,
       mods_.size());
}

int Function::num_regs() const {
  int v = 0;
  BRRR_CU(driver().cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f_), name_);
  return v;
}
void Function::allow_large_clusters() const {
  BRRR_CU(driver().cuFuncSetAttribute(f_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), name_);
}
void Function::set_max_dynamic_shared(unsigned bytes) const {
  BRRR_CU(driver().cuFuncSetAttribute(f_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)),
          name_);
}
int Function::max_active_clusters(Dim3 grid, Dim3 block, unsigned shared_bytes) const {
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid.x, cfg.gridDimY = grid.y, cfg.gridDimZ = grid.z;
  cfg.blockDimX = block.x, cfg.blockDimY = block.y, cfg.blockDimZ = block.z;
  cfg.sharedMemBytes = shared_bytes;
  int n = 0;
  BRRR_CU(driver().cuOccupancyMaxActiveClusters(&n, f_, &cfg), name_);
  return n;
}
int Function::local_bytes() const {
  int v = 0;
  BRRR_CU(driver().cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f_), name_);
  return v;
}

void launch(const Function& f, Dim3 grid, Dim3 block, unsigned shared_bytes, const Stream& s,
            void** args, bool dependent) {
  BRRR_CHECK(f.get() != nullptr, "launch of an empty kernel handle");
  // An empty grid (a zero-size tensor) has no work; cuLaunchKernel would reject it.
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  if (!dependent) {
    BRRR_CU(driver().cuLaunchKernel(f.get(), grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                    shared_bytes, s.get(), args, nullptr),
            "launch kernel " + f.name());
    return;
  }
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid.x, cfg.gridDimY = grid.y, cfg.gridDimZ = grid.z;
  cfg.blockDimX = block.x, cfg.blockDimY = block.y, cfg.blockDimZ = block.z;
  cfg.sharedMemBytes = shared_bytes;
  cfg.hStream = s.get();
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  BRRR_CU(driver().cuLaunchKernelEx(&cfg, f.get(), args, nullptr), "launch kernel (dependent) " + f.name());
}

}  // namespace brrr::cuda
