// CUDA device, stream, events and device memory behind a header free of <cuda.h>, so any brrr
// target can include it. Every driver call is checked: failures throw brrr::Error naming the
// call, the driver's error and what brrr was doing (kernel, node or buffer name).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;

namespace brrr::cuda {

using DevPtr = unsigned long long;  // CUdeviceptr

// True when a driver and at least one device are present; otherwise false and *reason says why
// (no libcuda, no device, driver too old). Never throws, never crashes.
bool cuda_device_available(std::string* reason = nullptr);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int max_shared_per_block_optin = 0;
  std::size_t total_mem = 0;
  int driver_version = 0;  // e.g. 13000
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

class Stream;
class Event;

// Whether device `ordinal`'s primary context exists now (cuDevicePrimaryCtxGetState).
bool primary_context_active(int ordinal);

// The device's primary context (shared with cudart, cuBLASLt and cuDNN), made current on the
// thread that constructs it. The context is retained once per process and never released (see
// cuda_runtime.cpp), so Devices may come and go; copies are not allowed.
class Device {
 public:
  explicit Device(int ordinal = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  void make_current() const;   // for threads other than the constructing one
  void synchronize() const;    // cuCtxSynchronize
  std::size_t free_bytes() const;

 private:
  DeviceInfo info_;
  int dev_ = 0;
  void* ctx_ = nullptr;  // CUcontext
};

class Stream {
 public:
  Stream();  // a non-blocking stream on the current context
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream_st* get() const { return s_; }
  void synchronize(const std::string& where = "stream synchronize") const;
  // Work enqueued after this waits for the work before e's last record (a fork or join of
  // streams; inside a capture, a graph edge).
  void wait(const Event& e) const;

 private:
  CUstream_st* s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& s);
  void synchronize();
  // Milliseconds between two recorded events (cuEventElapsedTime).
  static float elapsed_ms(const Event& start, const Event& stop);
  CUevent_st* get() const { return e_; }

 private:
  CUevent_st* e_ = nullptr;
};

// One device allocation (cuMemAlloc), freed on destruction. Out of memory throws brrr::Error
// naming the request, the free memory and `what`; the context stays usable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  DevPtr ptr() const { return p_; }
  std::size_t size() const { return n_; }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(p_); }

 private:
  void release() noexcept;
  DevPtr p_ = 0;
  std::size_t n_ = 0;
};

// One allocation for a whole plan: the memory planner hands out offsets, the arena checks them.
class Arena {
 public:
  static constexpr std::size_t kAlign = 256;  // cuBLASLt and 16-byte vector loads want this
  Arena(std::size_t bytes, const std::string& what) : buf_(bytes, what), what_(what) {}
  // Address of [offset, offset + bytes); throws brrr::Error when outside the arena or misaligned.
  DevPtr at(std::size_t offset, std::size_t bytes, const std::string& who) const;
  std::size_t size() const { return buf_.size(); }
  // Rounds up to kAlign, for planners that pack buffers back to back.
  static std::size_t align(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

 private:
  DeviceBuffer buf_;
  std::string what_;
};

// Large host-to-device copies (model weights at load) through two pinned staging buffers: host
// threads copy a band of the pageable source (often the mapped model file) into one buffer while
// the copy engine drains the other, instead of the driver's own staging of pageable memory on
// one thread. Without pinned memory (the allocation refused) it copies as copy_h2d does. The
// source must stay valid until the last copy's stream work is done or this object is destroyed.
class StagedUpload {
 public:
  explicit StagedUpload(std::size_t chunk_bytes = std::size_t(64) << 20);
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;
  void copy(DevPtr dst, const void* src, std::size_t bytes, const Stream& s, const std::string& what);

 private:
  std::size_t chunk_;
  void* buf_[2] = {nullptr, nullptr};
  Event done_[2];
  bool busy_[2] = {false, false};
  int next_ = 0;
};

// Stream-ordered copies; `what` names the buffer in error messages.
void copy_h2d(DevPtr dst, const void* src, std::size_t bytes, const Stream& s,
              const std::string& what);
void copy_d2h(void* dst, DevPtr src, std::size_t bytes, const Stream& s, const std::string& what);
void copy_d2d(DevPtr dst, DevPtr src, std::size_t bytes, const Stream& s, const std::string& what);
// `height` rows of `width` bytes from src (rows `src_pitch` apart) to dst (rows `dst_pitch`
// apart), device to device, stream-ordered (capturable into a CUDA graph).
void copy_2d_d2d(DevPtr dst, std::size_t dst_pitch, DevPtr src, std::size_t src_pitch,
                 std::size_t width, std::size_t height, const Stream& s, const std::string& what);
void memset_u32(DevPtr dst, std::uint32_t value, std::size_t count, const Stream& s,
                const std::string& what);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// A loaded cubin (cuModuleLoadData) and its kernels.
class Function {
 public:
  Function() = default;
  Function(CUfunc_st* f, std::string name) : f_(f), name_(std::move(name)) {}
  CUfunc_st* get() const { return f_; }
  const std::string& name() const { return name_; }
  int num_regs() const;
  int local_bytes() const;  // spills and stack: should be 0 for generated kernels
  // Lets the kernel launch with a cluster over the portable size of 8 (16 on Hopper).
  void allow_large_clusters() const;
  // Lets a launch ask for `bytes` of dynamic shared memory (over the default 48 KB).
  void set_max_dynamic_shared(unsigned bytes) const;
  // How many of the kernel's clusters (its compile-time cluster shape) the device holds at once
  // with `block` threads and `shared_bytes` of dynamic shared memory per CTA
  // (cuOccupancyMaxActiveClusters); a grid of more clusters runs in waves.
  int max_active_clusters(Dim3 grid, Dim3 block, unsigned shared_bytes) const;

 private:
  CUfunc_st* f_ = nullptr;
  std::string name_;
};

class Module {
 public:
  Module(const std::vector<char>& cubin, const std::string& what);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Function function(const std::string& name) const;  // throws naming the missing kernel
  std::optional<Function> find(const std::string& name) const;  // nullopt when it has none

 private:
  CUmod_st* m_ = nullptr;
  std::string what_;
};

// Modules searched as one by kernel name: a model's parts, compiled side by side.
class ModuleSet {
 public:
  void add(const std::vector<char>& cubin, const std::string& what);
  Function function(const std::string& name) const;  // throws naming the missing kernel

 private:
  std::vector<std::unique_ptr<Module>> mods_;
};

// cuLaunchKernel with the argument pointers; checks the launch and names the kernel on failure.
// `dependent`: programmatic dependent launch (sm_90+), the kernel may be scheduled while the one
// before it in the stream is still running, so it must call brrr_grid_wait() (prelude.cuh)
// before it touches memory; that returns once the previous kernel has finished and its writes
// are visible. Only for brrr's own kernels that do.
void launch(const Function& f, Dim3 grid, Dim3 block, unsigned shared_bytes, const Stream& s,
            void** args, bool dependent = false);

}  // namespace brrr::cuda
