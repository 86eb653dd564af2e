#include "backend/cuda/cudnn_pool.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "brrr/error.hpp"

#ifdef BRRR_HAVE_CUDNN
#include "backend/cuda/cudnn_api.hpp"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

namespace brrr::cuda {

std::string pool_geometry(const plan::PoolDesc& d, const Graph& g, PoolGeometry* geo) {
  const std::string op = d.max ? "MaxPool" : "AveragePool";
  if (d.x < 0 || d.y < 0) return op + " without X or Y";
  if (d.indices_used) return "MaxPool's Indices output is used (cuDNN pooling has none)";
  const Value &xv = g.value(d.x), &yv = g.value(d.y);
  for (const Value* v : {&xv, &yv})
    if (v->dtype != DType::f32)
      return fmt::format("{} is {} (the cuDNN pooling path is float32 only)", v->name,
                         dtype_name(v->dtype));
  const Shape &xs = xv.shape, &ys = yv.shape;
  const size_t r = xs.size();
  if (r < 3 || r > 5 || ys.size() != r || ys[0] != xs[0] || ys[1] != xs[1])
    return fmt::format("{} from {} to {} (cuDNN path: 1-D, 2-D and 3-D pools)", op,
                       shape_str(xs), shape_str(ys));
  if (!d.why.empty()) return d.why;
  const ops::Window& w = d.window;
  const bool max = d.max;
  const bool include_pad = d.include_pad;
  for (size_t i = 0; i < w.out.size(); ++i) {
    if (w.d[i] != 1)
      return fmt::format("dilations [{}] (cuDNN pooling has none)", fmt::join(w.d, ","));
    if (w.out[i] != ys[2 + i]) return op + " output shape disagrees with its window";
    // Every window must overlap the input (cuDNN's value for an all-padding window is not the
    // reference's): pads below the kernel size.
    if (w.pb[i] >= w.k[i] || w.pe[i] >= w.k[i])
      return fmt::format("pads [{}] as large as the kernel [{}]", fmt::join(w.pb, ","),
                         fmt::join(w.k, ","));
    // cuDNN pads both ends by pb. That gives the windows of the graph's pads (and of ceil_mode)
    // when it yields the same number of outputs: windows start at the same places, and padding
    // is never read by max or by an average that excludes it.
    int64_t span = w.in[i] + 2 * w.pb[i] - w.k[i];
    if (span < 0 || span / w.s[i] + 1 != w.out[i]) {
      if (d.ceil_mode)
        return fmt::format("ceil_mode adds a window (output {}) that cuDNN's symmetric padding "
                           "(pads [{}] / [{}]) cannot produce",
                           shape_str(ys), fmt::join(w.pb, ","), fmt::join(w.pe, ","));
      return fmt::format("asymmetric pads (begin [{}], end [{}]) that cuDNN's symmetric padding "
                         "cannot express", fmt::join(w.pb, ","), fmt::join(w.pe, ","));
    }
    // count_include_pad divides by the whole window: the reference counts taps up to the end
    // pad only, so the last window must end inside it.
    if (include_pad && (w.out[i] - 1) * w.s[i] - w.pb[i] + w.k[i] > w.in[i] + w.pe[i])
      return "count_include_pad=1 with a window past the end padding (ceil_mode or asymmetric "
             "pads): cuDNN would count the extra taps";
  }
  auto narrow = [](const Shape& s, std::vector<int>* out) {
    out->assign(s.begin(), s.end());
    return shape_numel(s) <= INT32_MAX;
  };
  if (!narrow(xs, &geo->x) || !narrow(ys, &geo->y))
    return "a pool tensor has 2^31 elements or more";
  geo->window.clear(), geo->pad.clear(), geo->stride.clear();
  for (size_t i = 0; i < w.out.size(); ++i) {
    if (w.k[i] > INT32_MAX || w.pb[i] > INT32_MAX || w.s[i] > INT32_MAX)
      return "pool kernel, pads or strides beyond int32";
    geo->window.push_back(int(w.k[i]));
    geo->pad.push_back(int(w.pb[i]));
    geo->stride.push_back(int(w.s[i]));
  }
  if (r == 3) {  // 1-D as 2-D with a unit height
    for (auto* v : {&geo->x, &geo->y}) v->insert(v->begin() + 2, 1);
    geo->window.insert(geo->window.begin(), 1);
    geo->pad.insert(geo->pad.begin(), 0);
    geo->stride.insert(geo->stride.begin(), 1);
  }
  geo->max = max;
  geo->include_pad = include_pad;
  return "";
}

namespace {
[[maybe_unused]] std::string describe_geo(const PoolGeometry& g) {
  return fmt::format("{} {} stride {} pad {}",
                     g.max ? "max" : g.include_pad ? "average (padding counted)" : "average",
                     fmt::join(g.window, "x"), fmt::join(g.stride, "x"), fmt::join(g.pad, "x"));
}
}  // namespace

#ifdef BRRR_HAVE_CUDNN

namespace {

std::vector<int> packed_strides(const std::vector<int>& d) {
  std::vector<int> s(d.size(), 1);
  for (size_t i = d.size() - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Descriptors of one pool, destroyed on every path.
struct PoolDescs {
  const CudnnApi& api;
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnPoolingDescriptor_t pd = nullptr;
  explicit PoolDescs(const CudnnApi& a) : api(a) {}
  ~PoolDescs() {
    if (xd) api.cudnnDestroyTensorDescriptor(xd);
    if (yd) api.cudnnDestroyTensorDescriptor(yd);
    if (pd) api.cudnnDestroyPoolingDescriptor(pd);
  }
  // Sets x and the pooling descriptor; returns the output dims cuDNN derives.
  std::vector<int> set(const PoolGeometry& g, const std::string& what) {
    const int nd = int(g.x.size()), nsp = nd - 2;
    BRRR_ASSERT((nd == 4 || nd == 5) && int(g.y.size()) == nd && int(g.window.size()) == nsp &&
                    int(g.pad.size()) == nsp && int(g.stride.size()) == nsp,
                "bad cuDNN pool geometry");
    BRRR_DNN(api, cudnnCreateTensorDescriptor, (&xd), what);
    BRRR_DNN(api, cudnnCreateTensorDescriptor, (&yd), what);
    BRRR_DNN(api, cudnnCreatePoolingDescriptor, (&pd), what);
    std::vector<int> xs = packed_strides(g.x);
    BRRR_DNN(api, cudnnSetTensorNdDescriptor, (xd, CUDNN_DATA_FLOAT, nd, g.x.data(), xs.data()),
             what);
    cudnnPoolingMode_t mode = g.max           ? CUDNN_POOLING_MAX
                              : g.include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                              : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    // NaN propagates like ONNX Runtime's and PyTorch's MaxPool.
    BRRR_DNN(api, cudnnSetPoolingNdDescriptor,
             (pd, mode, CUDNN_PROPAGATE_NAN, nsp, g.window.data(), g.pad.data(), g.stride.data()),
             what);
    std::vector<int> out(size_t(nd), 0);
    BRRR_DNN(api, cudnnGetPoolingNdForwardOutputDim, (pd, xd, nd, out.data()), what);
    std::vector<int> ys = packed_strides(g.y);
    BRRR_DNN(api, cudnnSetTensorNdDescriptor, (yd, CUDNN_DATA_FLOAT, nd, g.y.data(), ys.data()),
             what);
    return out;
  }
};

}  // namespace

std::vector<int> cudnn_pool_output_dims(const PoolGeometry& g) {
  std::string why;
  const CudnnApi* api = try_cudnn(&why);
  if (!api) fail("{}", why);
  PoolDescs d(*api);
  return d.set(g, "pool output dims");
}

struct CudnnPool::Impl {
  std::unique_ptr<PoolDescs> d;
  cudnnHandle_t h = nullptr;
  std::string what, desc;
};

CudnnPool::CudnnPool(const CudnnContext& ctx, const PoolGeometry& g, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  const CudnnApi* api = try_cudnn();
  BRRR_ASSERT(api != nullptr, "CudnnPool without a loaded cuDNN");
  Impl& p = *impl_;
  p.h = static_cast<cudnnHandle_t>(ctx.handle());
  p.what = what;
  p.desc = describe_geo(g);
  p.d = std::make_unique<PoolDescs>(*api);
  std::vector<int> out = p.d->set(g, what);
  if (out != g.y)
    fail("cuDNN computes pool output dims [{}] for {} but the graph says [{}]",
         fmt::join(out, ","), what, fmt::join(g.y, ","));
}

CudnnPool::~CudnnPool() = default;

std::string CudnnPool::describe() const { return impl_->desc; }

void CudnnPool::run(DevPtr x, DevPtr y) const {
  const Impl& p = *impl_;
  const float one = 1.f, zero = 0.f;
  BRRR_DNN(p.d->api, cudnnPoolingForward,
           (p.h, p.d->pd, &one, p.d->xd, reinterpret_cast<const void*>(x), &zero, p.d->yd,
            reinterpret_cast<void*>(y)),
           p.what);
}

#else  // built without cudnn.h: pools stay on the host

std::vector<int> cudnn_pool_output_dims(const PoolGeometry&) {
  fail("brrr was built without cuDNN headers");
}
struct CudnnPool::Impl {};
CudnnPool::CudnnPool(const CudnnContext&, const PoolGeometry&, const std::string& what) {
  fail("{}: brrr was built without cuDNN headers", what);
}
CudnnPool::~CudnnPool() = default;
std::string CudnnPool::describe() const { return "no cuDNN"; }
void CudnnPool::run(DevPtr, DevPtr) const { fail("brrr was built without cuDNN headers"); }

#endif

}  // namespace brrr::cuda
