#include "cli/inputs.hpp"


namespace brrr::cli {

Tensor random_tensor(DType t, const Shape& s, uint64_t seed) {
  // xorshift64: fast enough for the 2^28-element GPU workloads.
  uint64_t st = seed * 0x9E3779B97F4A7C15ull | 1u;
  auto next = [&st] {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return st;
  };
  Tensor x = Tensor::empty(t, s);
  int64_t n = x.numel();
  dispatch_dtype(t, [&]<typename T>() {
    T* p = x.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      uint64_t r = next();
      if constexpr (std::is_same_v<T, bool>)
        p[i] = (r >> 40) & 1;
      else if constexpr (std::is_integral_v<T>)
        p[i] = T((r >> 40) & 1);
      else
        p[i] = T(float(r >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
  });
  return x;
}

std::map<std::string, Tensor> random_inputs(const Graph& g, uint64_t seed) {
  std::map<std::string, Tensor> in;
  uint64_t k = 0;
  for (int id : g.inputs) {
    const Value& v = g.value(id);
    in[v.name] = random_tensor(v.dtype, v.shape, seed * 1000003u + k++);
  }
  return in;
}

}  // namespace brrr::cli
