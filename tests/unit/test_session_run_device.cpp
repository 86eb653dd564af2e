// Session::run_device: inputs and outputs in the caller's device memory (the Python package's
// CUDA-tensor path). On the GPU its outputs equal run()'s byte for byte; elsewhere it is a
// one-line error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "brrr/session.hpp"

#ifdef BRRR_HAVE_CUDA
#include "cuda_test_util.hpp"
#endif

namespace brrr {
namespace {

const std::string kMlp = std::string(BRRR_TEST_DATA) + "/../../examples/mlp_tiny/model.onnx";

Tensor ramp(const Shape& s) {
  Tensor t = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 17) * 0.125f - 1.0f;
  return t;
}

TEST(SessionRunDevice, CpuSessionRefusesDeviceBuffers) {
  Session s(kMlp);
  try {
    s.run_device({}, {});
    FAIL() << "run_device on the cpu backend did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "run_device: this session runs on the host; device buffers need "
                           "backend cuda");
  }
}

#ifdef BRRR_HAVE_CUDA
TEST(SessionRunDevice, CudaOutputsEqualRunsOutputs) {
  BRRR_REQUIRE_CUDA_DEVICE();
  using namespace brrr::cuda;
  brrr_cuda_test::test_device();
  SessionOptions o;
  o.backend = "cuda";
  Session s(kMlp, o);
  const Value& vin = s.graph().value(s.graph().inputs[0]);
  const Value& vout = s.graph().value(s.graph().outputs[0]);
  Tensor x = ramp(vin.shape);
  Tensor want = s.run({{vin.name, x}})[0];

  Stream st;
  DeviceBuffer din(x.nbytes(), "test input"), dout(want.nbytes(), "test output");
  copy_h2d(din.ptr(), x.raw(), x.nbytes(), st, "test input");
  st.synchronize();
  s.run_device({{vin.name, {din.as<void>(), DType::f32, vin.shape}}},
               {{dout.as<void>(), DType::f32, vout.shape}});
  Tensor got = Tensor::empty(DType::f32, vout.shape);
  copy_d2h(got.raw(), dout.ptr(), got.nbytes(), st, "test output");
  st.synchronize();
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);

  // The same checks as run() on host tensors, with the same messages.
  Shape wrong = {vin.shape[1], vin.shape[0]};
  EXPECT_THROW(s.run_device({{vin.name, {din.as<void>(), DType::f32, wrong}}},
                            {{dout.as<void>(), DType::f32, vout.shape}}),
               Error);
  EXPECT_THROW(s.run_device({{vin.name, {din.as<void>(), DType::f32, vin.shape}}}, {}), Error);
  EXPECT_THROW(s.run_device({}, {{dout.as<void>(), DType::f32, vout.shape}}), Error);
  // A float buffer off its 4-byte alignment is refused before anything runs.
  try {
    s.run_device({{vin.name, {din.as<void>(), DType::f32, vin.shape}}},
                 {{reinterpret_cast<char*>(dout.as<void>()) + 2, DType::f32, vout.shape}});
    ADD_FAILURE() << "a misaligned output buffer was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not aligned to its 4-byte elements"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace brrr
