#include "backend/cuda/cudnn_conv.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "brrr/error.hpp"

#ifdef BRRR_HAVE_CUDNN
#include "backend/cuda/cudnn_api.hpp"
// cuDNN 9 marks the legacy convolution API deprecated; it is what this file uses.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

namespace brrr::cuda {

const char* to_string(ConvMath m) {
  switch (m) {
    case ConvMath::kTf32: return "tf32";
    case ConvMath::kBf16: return "bf16";
    case ConvMath::kFp16: return "fp16";
    default: return "fp32";
  }
}

std::string conv_geometry(const plan::ConvDesc& d, const Shape& xs, const Shape& ws,
                          const Shape& ys, ConvGeometry* geo) {
  const size_t r = xs.size();
  if (r < 3 || r > 5 || ws.size() != r || ys.size() != r)
    return fmt::format("Conv on rank-{} input (cuDNN path: 1-D, 2-D and 3-D)", r);
  const int64_t G = d.groups;
  if (G < 1 || xs[1] % G || ws[0] % G || ws[1] * G != xs[1] || ys[1] != ws[0] || ys[0] != xs[0])
    return fmt::format("group {} does not fit input {}, weights {} and output {}", G,
                       shape_str(xs), shape_str(ws), shape_str(ys));
  if (!d.why.empty()) return d.why;
  const ops::Window& w = d.window;
  for (size_t i = 0; i < w.out.size(); ++i) {
    if (w.out[i] != ys[2 + i]) return "Conv output shape disagrees with its window";
    // cuDNN pads both ends by one amount. Pads pb != pe still work with pad pb when that gives
    // the same number of outputs: the windows then start at the same places and never reach
    // past the graph's own end padding.
    int64_t dk = (w.k[i] - 1) * w.d[i] + 1, span = w.in[i] + 2 * w.pb[i] - dk;
    if (w.pb[i] != w.pe[i] && (span < 0 || span / w.s[i] + 1 != w.out[i]))
      return fmt::format("asymmetric pads (begin [{}], end [{}]) that cuDNN's symmetric padding "
                         "cannot express", fmt::join(w.pb, ","), fmt::join(w.pe, ","));
  }
  auto narrow = [](const Shape& s, std::vector<int>* out) {
    out->assign(s.begin(), s.end());
    return shape_numel(s) <= INT32_MAX;
  };
  if (!narrow(xs, &geo->x) || !narrow(ws, &geo->w) || !narrow(ys, &geo->y))
    return "a Conv tensor has 2^31 elements or more";
  geo->pad.clear(), geo->stride.clear(), geo->dilation.clear();
  for (size_t i = 0; i < w.out.size(); ++i) {
    if (w.pb[i] > INT32_MAX || w.s[i] > INT32_MAX || w.d[i] > INT32_MAX)
      return "Conv pads, strides or dilations beyond int32";
    geo->pad.push_back(int(w.pb[i]));
    geo->stride.push_back(int(w.s[i]));
    geo->dilation.push_back(int(w.d[i]));
  }
  if (r == 3) {  // 1-D as 2-D with a unit height
    for (auto* v : {&geo->x, &geo->w, &geo->y}) v->insert(v->begin() + 2, 1);
    geo->pad.insert(geo->pad.begin(), 0);
    geo->stride.insert(geo->stride.begin(), 1);
    geo->dilation.insert(geo->dilation.begin(), 1);
  }
  geo->groups = int(G);
  return "";
}

#ifdef BRRR_HAVE_CUDNN

namespace {

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default math";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op math";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op math with conversion";
    case CUDNN_FMA_MATH: return "FMA math";
  }
  return "?";
}

std::vector<int> packed_strides(const std::vector<int>& d) {
  std::vector<int> s(d.size(), 1);
  for (size_t i = d.size() - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Packed strides of dims (N, C, spatial...): NCHW order, or channels-last (N, H, W, C) for a
// 4-D tensor.
std::vector<int> strides_of(const std::vector<int>& d, bool nhwc) {
  if (!nhwc) return packed_strides(d);
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

}  // namespace

std::unique_ptr<CudnnContext> CudnnContext::open(const Stream& s, std::string* reason) {
  const CudnnApi* api = try_cudnn(reason);
  if (!api) return nullptr;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = api->cudnnCreate(&h);
  if (st != CUDNN_STATUS_SUCCESS) {
    if (reason) *reason = std::string("cudnnCreate failed: ") + api->cudnnGetErrorString(st);
    return nullptr;
  }
  std::unique_ptr<CudnnContext> c(new CudnnContext());
  c->h_ = h;
  // The executor's driver-API stream: CUstream and cudaStream_t are the same type.
  BRRR_DNN(*api, cudnnSetStream, (h, s.get()), "binding the cuDNN handle to the stream");
  return c;
}

std::size_t cudnn_version() {
  const CudnnApi* api = try_cudnn();
  return api ? api->version : 0;
}

CudnnContext::~CudnnContext() {
  if (h_)
    if (const CudnnApi* api = try_cudnn()) api->cudnnDestroy(static_cast<cudnnHandle_t>(h_));
}

bool cudnn_available(std::string* reason) { return try_cudnn(reason) != nullptr; }

namespace {

cudnnDataType_t data_type(DType t) {
  return t == DType::bf16 ? CUDNN_DATA_BFLOAT16 : t == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

// Sets the descriptors for `g` (its dtype, packed NCHW / NCDHW, cross-correlation, float32
// accumulation).
void set_descriptors(const CudnnApi& api, const ConvGeometry& g, cudnnTensorDescriptor_t xd,
                     cudnnFilterDescriptor_t wd, cudnnConvolutionDescriptor_t cd,
                     const std::string& what) {
  const int nd = int(g.x.size()), nsp = nd - 2;
  BRRR_ASSERT((nd == 4 || nd == 5) && int(g.w.size()) == nd && int(g.y.size()) == nd &&
                  int(g.pad.size()) == nsp && int(g.stride.size()) == nsp &&
                  int(g.dilation.size()) == nsp,
              "bad cuDNN conv geometry");
  BRRR_ASSERT(!g.nhwc || nd == 4, "channels-last cuDNN conv on a tensor that is not 4-D");
  std::vector<int> xs = strides_of(g.x, g.nhwc);
  BRRR_DNN(api, cudnnSetTensorNdDescriptor, (xd, data_type(g.dt), nd, g.x.data(), xs.data()),
           what);
  BRRR_DNN(api, cudnnSetFilterNdDescriptor,
           (wd, data_type(g.dt), g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nd, g.w.data()),
           what);
  // ONNX Conv is a cross-correlation (no kernel flip); accumulate in float32.
  BRRR_DNN(api, cudnnSetConvolutionNdDescriptor,
           (cd, nsp, g.pad.data(), g.stride.data(), g.dilation.data(), CUDNN_CROSS_CORRELATION,
            CUDNN_DATA_FLOAT),
           what);
  BRRR_DNN(api, cudnnSetConvolutionGroupCount, (cd, g.groups), what);
}

std::vector<int> output_dims(const CudnnApi& api, const ConvGeometry& g,
                             cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                             cudnnConvolutionDescriptor_t cd, const std::string& what) {
  std::vector<int> out(g.x.size(), 0);
  BRRR_DNN(api, cudnnGetConvolutionNdForwardOutputDim, (cd, xd, wd, int(out.size()), out.data()),
           what);
  return out;
}

}  // namespace

std::vector<int> cudnn_output_dims(const ConvGeometry& g) {
  std::string why;
  const CudnnApi* api = try_cudnn(&why);
  if (!api) fail("{}", why);
  struct Descs {  // destroyed on every path
    const CudnnApi& api;
    cudnnTensorDescriptor_t xd = nullptr;
    cudnnFilterDescriptor_t wd = nullptr;
    cudnnConvolutionDescriptor_t cd = nullptr;
    ~Descs() {
      if (xd) api.cudnnDestroyTensorDescriptor(xd);
      if (wd) api.cudnnDestroyFilterDescriptor(wd);
      if (cd) api.cudnnDestroyConvolutionDescriptor(cd);
    }
  } d{*api};
  BRRR_DNN(*api, cudnnCreateTensorDescriptor, (&d.xd), "output dims");
  BRRR_DNN(*api, cudnnCreateFilterDescriptor, (&d.wd), "output dims");
  BRRR_DNN(*api, cudnnCreateConvolutionDescriptor, (&d.cd), "output dims");
  set_descriptors(*api, g, d.xd, d.wd, d.cd, "output dims");
  return output_dims(*api, g, d.xd, d.wd, d.cd, "output dims");
}

struct CudnnConv::Impl {
  const CudnnApi* api = nullptr;
  cudnnHandle_t h = nullptr;
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  ConvMath want = ConvMath::kFp32;
  bool nhwc = false;
  bool timed = false;  // the algorithm came from cuDNN's timing (BRRR_CONV_TUNE=1)
  size_t ws = 0;
  std::string what;
  // fuse_epilogue: the bias's descriptor (1, K, 1, ...), the activation, whether a sum is added.
  std::vector<int> ydims;  // y's dims (N, K, spatial...) and data type
  cudnnDataType_t ydt = CUDNN_DATA_FLOAT;
  cudnnTensorDescriptor_t bd = nullptr;
  cudnnActivationDescriptor_t ad = nullptr;
  bool fused = false, fused_relu = false;
  // y = act(conv(x, w) + sum + bias) in one cuDNN call (sum 0: none; z is then y, weighted 0).
  cudnnStatus_t bias_activation(DevPtr x, DevPtr w, DevPtr y, DevPtr wsp, DevPtr bias,
                                DevPtr sum) const {
    const float one = 1.f, zero = 0.f;
    return api->cudnnConvolutionBiasActivationForward(
        h, &one, xd, reinterpret_cast<const void*>(x), wd, reinterpret_cast<const void*>(w), cd,
        algo, reinterpret_cast<void*>(wsp), ws, sum ? &one : &zero, yd,
        reinterpret_cast<const void*>(sum ? sum : y), bd, reinterpret_cast<const void*>(bias), ad,
        yd, reinterpret_cast<void*>(y));
  }
  ~Impl() {
    if (!api) return;
    if (bd) api->cudnnDestroyTensorDescriptor(bd);
    if (ad) api->cudnnDestroyActivationDescriptor(ad);
    if (xd) api->cudnnDestroyTensorDescriptor(xd);
    if (yd) api->cudnnDestroyTensorDescriptor(yd);
    if (wd) api->cudnnDestroyFilterDescriptor(wd);
    if (cd) api->cudnnDestroyConvolutionDescriptor(cd);
  }
};

CudnnConv::CudnnConv(const CudnnContext& ctx, const ConvGeometry& g, ConvMath m,
                     size_t max_workspace, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.api = try_cudnn();
  BRRR_ASSERT(c.api != nullptr, "CudnnConv without a loaded cuDNN");
  const CudnnApi& api = *c.api;
  c.h = static_cast<cudnnHandle_t>(ctx.handle());
  c.what = what;
  c.want = m;
  c.nhwc = g.nhwc;
  BRRR_DNN(api, cudnnCreateTensorDescriptor, (&c.xd), what);
  BRRR_DNN(api, cudnnCreateTensorDescriptor, (&c.yd), what);
  BRRR_DNN(api, cudnnCreateFilterDescriptor, (&c.wd), what);
  BRRR_DNN(api, cudnnCreateConvolutionDescriptor, (&c.cd), what);
  set_descriptors(api, g, c.xd, c.wd, c.cd, what);
  c.ydims = g.y;
  c.ydt = data_type(g.dt);
  std::vector<int> ys = strides_of(g.y, g.nhwc);
  BRRR_DNN(api, cudnnSetTensorNdDescriptor,
           (c.yd, data_type(g.dt), int(g.y.size()), g.y.data(), ys.data()), what);
  c.math = m == ConvMath::kFp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  BRRR_DNN(api, cudnnSetConvolutionMathType, (c.cd, c.math), what);
  std::vector<int> out = output_dims(api, g, c.xd, c.wd, c.cd, what);
  if (out != g.y)
    fail("cuDNN computes output dims [{}] for {} but the graph says [{}]", fmt::join(out, ","),
         what, fmt::join(g.y, ","));

  int max_count = 0;
  BRRR_DNN(api, cudnnGetConvolutionForwardAlgorithmMaxCount, (c.h, &max_count), what);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
  int got = 0;
  BRRR_DNN(api, cudnnGetConvolutionForwardAlgorithm_v7,
           (c.h, c.xd, c.wd, c.cd, c.yd, int(perf.size()), &got, perf.data()), what);
  // The heuristic's order, first fit wins. fp32 forces FMA math on every candidate (no TF32
  // whatever the heuristic reports); tf32, bf16 and fp16 take the math type the heuristic paired
  // with the algorithm. A candidate whose workspace query fails with that math type is skipped.
  std::string tried;
  for (int i = 0; i < got; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    cudnnMathType_t mt = m == ConvMath::kFp32 ? CUDNN_FMA_MATH : p.mathType;
    if (mt == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;  // would drop to fp16
    if (api.cudnnSetConvolutionMathType(c.cd, mt) != CUDNN_STATUS_SUCCESS) continue;
    size_t ws = 0;
    cudnnStatus_t st =
        api.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.xd, c.wd, c.cd, c.yd, p.algo, &ws);
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", algo_name(p.algo),
                         st == CUDNN_STATUS_SUCCESS ? fmt::format("{} B", ws)
                                                    : api.cudnnGetErrorString(st));
    if (st != CUDNN_STATUS_SUCCESS || ws > max_workspace) continue;
    c.algo = p.algo;
    c.math = mt;
    c.ws = ws;
    return;
  }
  fail("cuDNN has no forward algorithm for {} within {} B of workspace (tried: {})", what,
       max_workspace, tried.empty() ? "none" : tried);
}

// BRRR_CONV_TUNE=1 (opt-in, not yet measured): cuDNN times every algorithm on scratch buffers
// once, and the fastest that fits replaces the heuristic's choice under the same rules (fp32
// keeps FMA math, no down-conversion); any refusal keeps the heuristic's choice.
void CudnnConv::time_algorithms(size_t max_workspace) {
  Impl& c = *impl_;
  const CudnnApi& api = *c.api;
  if (!api.cudnnFindConvolutionForwardAlgorithm) return;
  int max_count = 0;
  BRRR_DNN(api, cudnnGetConvolutionForwardAlgorithmMaxCount, (c.h, &max_count), c.what);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> timed(size_t(std::max(max_count, 1)));
  int n = 0;
  if (api.cudnnFindConvolutionForwardAlgorithm(c.h, c.xd, c.wd, c.cd, c.yd, int(timed.size()), &n,
                                               timed.data()) == CUDNN_STATUS_SUCCESS)
    for (int i = 0; i < n; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& p = timed[size_t(i)];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > max_workspace ||
          p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
          (c.want == ConvMath::kFp32 && p.mathType == CUDNN_TENSOR_OP_MATH))
        continue;
      size_t ws = 0;
      if (api.cudnnSetConvolutionMathType(c.cd, p.mathType) != CUDNN_STATUS_SUCCESS ||
          api.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.xd, c.wd, c.cd, c.yd, p.algo, &ws) !=
              CUDNN_STATUS_SUCCESS ||
          ws > max_workspace)
        continue;
      c.algo = p.algo;
      c.math = p.mathType;
      c.ws = ws;
      c.timed = true;
      return;
    }
  BRRR_DNN(api, cudnnSetConvolutionMathType, (c.cd, c.math), c.what);  // the heuristic's again
}

CudnnConv::~CudnnConv() = default;

size_t CudnnConv::workspace_bytes() const { return impl_->ws; }

std::string CudnnConv::describe() const {
  return fmt::format("{} {} ({}){}{}, workspace {} B{}", algo_name(impl_->algo), to_string(impl_->want),
                     math_name(impl_->math), impl_->nhwc ? ", NHWC" : "",
                     impl_->timed ? ", timed" : "", impl_->ws,
                     impl_->fused ? impl_->fused_relu ? ", bias/sum/ReLU fused in cuDNN"
                                                      : ", bias/sum fused in cuDNN"
                                  : "");
}

void CudnnConv::run(DevPtr x, DevPtr w, DevPtr y, DevPtr ws) const {
  const Impl& c = *impl_;
  const float one = 1.f, zero = 0.f;
  BRRR_DNN(*c.api, cudnnConvolutionForward,
           (c.h, &one, c.xd, reinterpret_cast<const void*>(x), c.wd,
            reinterpret_cast<const void*>(w), c.cd, c.algo,
            c.ws ? reinterpret_cast<void*>(ws) : nullptr, c.ws, &zero, c.yd,
            reinterpret_cast<void*>(y)),
           c.what);
}

bool CudnnConv::fuse_epilogue(bool relu, DevPtr x, DevPtr w, DevPtr y, DevPtr ws, DevPtr bias,
                              DevPtr sum) {
  Impl& c = *impl_;
  const CudnnApi& api = *c.api;
  if (!api.cudnnConvolutionBiasActivationForward || !api.cudnnCreateActivationDescriptor ||
      !api.cudnnSetActivationDescriptor || !api.cudnnDestroyActivationDescriptor || !bias)
    return false;
  if (!relu && c.algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
  // The bias's descriptor: y's type and rank, one value per output channel.
  const int rank = int(c.ydims.size());
  if (rank < 3) return false;
  if (!c.bd && api.cudnnCreateTensorDescriptor(&c.bd) != CUDNN_STATUS_SUCCESS) return false;
  std::vector<int> bdims(size_t(rank), 1), bstr(size_t(rank), 1);
  bdims[1] = c.ydims[1];
  for (int a = rank - 2; a >= 0; --a) bstr[size_t(a)] = bstr[size_t(a) + 1] * bdims[size_t(a) + 1];
  if (api.cudnnSetTensorNdDescriptor(c.bd, c.ydt, rank, bdims.data(), bstr.data()) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  if (!c.ad && api.cudnnCreateActivationDescriptor(&c.ad) != CUDNN_STATUS_SUCCESS) return false;
  if (api.cudnnSetActivationDescriptor(c.ad, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_PROPAGATE_NAN, 0.0) != CUDNN_STATUS_SUCCESS)
    return false;
  c.fused_relu = relu;
  c.fused = c.bias_activation(x, w, y, ws, bias, sum) == CUDNN_STATUS_SUCCESS;
  return c.fused;
}

bool CudnnConv::fused() const { return impl_->fused; }

void CudnnConv::run_fused(DevPtr x, DevPtr w, DevPtr y, DevPtr ws, DevPtr bias, DevPtr sum) const {
  check_dnn(impl_->bias_activation(x, w, y, ws, bias, sum),
            "cudnnConvolutionBiasActivationForward", impl_->what);
}

#else  // built without cudnn.h: Conv stays on the host

std::unique_ptr<CudnnContext> CudnnContext::open(const Stream&, std::string* reason) {
  if (reason) *reason = "brrr was built without cuDNN headers";
  return nullptr;
}
CudnnContext::~CudnnContext() = default;
std::size_t cudnn_version() { return 0; }
bool cudnn_available(std::string* reason) {
  if (reason) *reason = "brrr was built without cuDNN headers";
  return false;
}
struct CudnnConv::Impl {};
CudnnConv::CudnnConv(const CudnnContext&, const ConvGeometry&, ConvMath, size_t,
                     const std::string& what) {
  fail("{}: brrr was built without cuDNN headers", what);
}
CudnnConv::~CudnnConv() = default;
void CudnnConv::time_algorithms(size_t) {}
size_t CudnnConv::workspace_bytes() const { return 0; }
std::string CudnnConv::describe() const { return "no cuDNN"; }
std::vector<int> cudnn_output_dims(const ConvGeometry&) {
  fail("brrr was built without cuDNN headers");
}
void CudnnConv::run(DevPtr, DevPtr, DevPtr, DevPtr) const {
  fail("brrr was built without cuDNN headers");
}
bool CudnnConv::fuse_epilogue(bool, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr) { return false; }
bool CudnnConv::fused() const { return false; }
void CudnnConv::run_fused(DevPtr, DevPtr, DevPtr, DevPtr, DevPtr, DevPtr) const {
  fail("brrr was built without cuDNN headers");
}

#endif

}  // namespace brrr::cuda
