// cuBLASLt GEMM per precision and epilogue against a double-precision CPU reference, by
// ||out - ref|| / ||ref|| with a per-precision tolerance.
#include <gtest/gtest.h>

#ifdef BRRR_HAVE_CUDA
#include <random>

#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_executor_impl.hpp"
#include "brrr/error.hpp"
#include "brrr/scalar_ops.h"
#include "cuda_test_util.hpp"

using namespace brrr::cuda;
namespace bt = brrr_cuda_test;

namespace {

double tolerance(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32: return 1e-5;
    case GemmPrecision::kTf32: return 3e-3;
    default: return 1e-2;  // 16-bit output rounding dominates
  }
}

struct Case {
  GemmPrecision p;
  GemmEpilogue e;
  GemmShape shape;
};

// Uploads A, B, bias in the precision's type, runs, downloads C as float.
void run_case(const Case& c) {
  bt::test_device();
  const auto [M, N, K, batch] = std::tuple(c.shape.m, c.shape.n, c.shape.k, c.shape.batch);
  std::mt19937 rng(1234 + int(c.p) * 10 + int(c.e));
  const bool half = element_bytes(c.p) == 2;
  // 16-bit cases use multiples of 1/64 in [-2, 2]: exact in bf16 and fp16, so only the GEMM's
  // own rounding is measured. fp32/tf32 use general floats so tf32's rounding shows.
  std::uniform_int_distribution<int> qi(-128, 128);
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  auto draw = [&] { return half ? qi(rng) / 64.0f : uf(rng); };
  std::vector<float> a(batch * M * K), b(batch * K * N), bias(N);
  for (float& v : a) v = draw();
  for (float& v : b) v = draw();
  for (float& v : bias) v = draw();

  auto to_device = [&](const std::vector<float>& h, DeviceBuffer& d, const Stream& s) {
    if (!half) return copy_h2d(d.ptr(), h.data(), h.size() * 4, s, "upload");
    std::vector<std::uint16_t> bits(h.size());
    for (size_t i = 0; i < h.size(); ++i)
      bits[i] = c.p == GemmPrecision::kBf16 ? bt::f32_to_bf16_exact(h[i]) : bt::f32_to_f16_exact(h[i]);
    copy_h2d(d.ptr(), bits.data(), bits.size() * 2, s, "upload");
    s.synchronize();  // bits is local
  };
  const size_t eb = element_bytes(c.p);
  Stream s;
  DeviceBuffer da(a.size() * eb, "A"), db(b.size() * eb, "B"), dc(batch * M * N * eb, "C"),
      dbias(N * eb, "bias");
  to_device(a, da, s);
  to_device(b, db, s);
  to_device(bias, dbias, s);
  memset_u32(dc.ptr(), 0x7fc07fc0u, dc.size() / 4, s, "poison C");  // NaN in every type
  LtGemm lt;
  lt.run(c.p, c.e, c.shape, da.ptr(), db.ptr(), dc.ptr(),
         c.e == GemmEpilogue::kNone ? 0 : dbias.ptr(), s, "test gemm");
  std::vector<float> out(batch * M * N);
  if (half) {
    std::vector<std::uint16_t> bits(out.size());
    copy_d2h(bits.data(), dc.ptr(), bits.size() * 2, s, "C");
    s.synchronize();
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = c.p == GemmPrecision::kBf16 ? bt::bf16_to_f32(bits[i]) : bt::f16_to_f32(bits[i]);
  } else {
    copy_d2h(out.data(), dc.ptr(), out.size() * 4, s, "C");
    s.synchronize();
  }

  std::vector<double> ref(out.size());
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += double(a[(bi * M + i) * K + k]) * double(b[(bi * K + k) * N + j]);
        if (c.e != GemmEpilogue::kNone) acc += bias[j];
        if (c.e == GemmEpilogue::kReluBias) acc = acc > 0 ? acc : 0;
        if (c.e == GemmEpilogue::kGeluBias) acc = brrr_gelu_tanh(float(acc));  // cuBLASLt's GELU
        ref[(bi * M + i) * N + j] = acc;
      }
  double err = bt::rel_l2(out, ref);
  double tol = tolerance(c.p) + (c.e == GemmEpilogue::kGeluBias ? 1e-4 : 0);  // GELU approx
  EXPECT_LT(err, tol) << to_string(c.p) << " " << to_string(c.e) << " " << M << "x" << N << "x"
                      << K << " batch " << batch;
  EXPECT_EQ(lt.cached_plans(), 1u);
}

}  // namespace

class CudaGemm : public ::testing::TestWithParam<GemmPrecision> {};

TEST_P(CudaGemm, PlainMatchesCpu) {
  BRRR_REQUIRE_CUDA_DEVICE();
  run_case({GetParam(), GemmEpilogue::kNone, {96, 80, 64}});
  run_case({GetParam(), GemmEpilogue::kNone, {256, 128, 512}});
}
TEST_P(CudaGemm, Batched) {
  BRRR_REQUIRE_CUDA_DEVICE();
  run_case({GetParam(), GemmEpilogue::kNone, {64, 32, 48, 3}});
}
TEST_P(CudaGemm, BiasReluGeluEpilogues) {
  BRRR_REQUIRE_CUDA_DEVICE();
  for (GemmEpilogue e : {GemmEpilogue::kBias, GemmEpilogue::kReluBias, GemmEpilogue::kGeluBias})
    run_case({GetParam(), e, {128, 96, 64}});
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGemm,
                         ::testing::Values(GemmPrecision::kFp32, GemmPrecision::kTf32,
                                           GemmPrecision::kBf16, GemmPrecision::kFp16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(CudaGemmErrors, MissingBiasAndBadShape) {
  BRRR_REQUIRE_CUDA_DEVICE();
  bt::test_device();
  Stream s;
  LtGemm lt;
  DeviceBuffer buf(1 << 16, "buf");
  EXPECT_THROW(lt.run(GemmPrecision::kFp32, GemmEpilogue::kBias, {8, 8, 8}, buf.ptr(), buf.ptr(),
                      buf.ptr(), 0, s, "no bias"),
               brrr::Error);
  EXPECT_THROW(lt.run(GemmPrecision::kFp32, GemmEpilogue::kNone, {0, 8, 8}, buf.ptr(), buf.ptr(),
                      buf.ptr(), 0, s, "empty"),
               brrr::Error);
}


// GEMM weights as uploaded (host_cast, no device needed): a cast, and a transpose of the last two
// axes by tiles on several threads, of shapes that do and do not fill whole tiles (batched too),
// equal the element-by-element result; the same type is moved as bits (NaN payloads kept).
TEST(CudaHostCast, TransposesAndCastsEveryElement) {
  using brrr::DType;
  using brrr::Tensor;
  for (brrr::Shape s : {brrr::Shape{3, 70, 130}, brrr::Shape{1000, 3000}, brrr::Shape{64, 64}})
    for (DType from : {DType::f32, DType::bf16, DType::f16})
      for (DType to : {DType::f32, DType::bf16, DType::f16}) {
        const int64_t rows = s[s.size() - 2], cols = s.back(), n = brrr::shape_numel(s);
        Tensor x = Tensor::empty(from, s);
        for (int64_t i = 0; i < n; ++i) {
          const float v = std::sin(float(i) * 0.37f) * 100.f;
          if (from == DType::f32) x.data<float>()[i] = v;
          else if (from == DType::bf16) x.data<brrr::bf16>()[i] = brrr::bf16(v);
          else x.data<brrr::f16>()[i] = brrr::f16(v);
        }
        if (from == DType::bf16) x.data<brrr::bf16>()[5].bits = 0x7f81;  // a NaN with a payload
        Tensor t = host_cast(x, to, true), c = host_cast(x, to, false);
        ASSERT_EQ(t.shape()[t.rank() - 2], cols);
        auto at = [](const Tensor& u, int64_t i) -> float {
          return u.dtype() == DType::f32 ? u.data<float>()[i]
                 : u.dtype() == DType::bf16 ? float(u.data<brrr::bf16>()[i])
                                             : float(u.data<brrr::f16>()[i]);
        };
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t b = i / (rows * cols), r = i / cols % rows, q = i % cols;
          const int64_t j = b * rows * cols + q * rows + r;
          const float e = at(c, i), got = at(t, j);
          bad += !(got == e || (std::isnan(got) && std::isnan(e)));
        }
        EXPECT_EQ(bad, 0) << brrr::shape_str(s) << " " << brrr::dtype_name(from) << " -> "
                          << brrr::dtype_name(to);
        if (from == to && from == DType::bf16) {
          EXPECT_EQ(t.data<brrr::bf16>()[5 * rows].bits, 0x7f81);
        }
      }
}

#else
TEST(CudaGemm, NotBuilt) { GTEST_SKIP() << "no CUDA device: built without the CUDA toolkit"; }
#endif
