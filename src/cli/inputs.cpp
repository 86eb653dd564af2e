#include "cli/inputs.hpp"

#include <random>

namespace brrr::cli {

Tensor random_tensor(DType t, const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor x = Tensor::empty(t, s);
  int64_t n = x.numel();
  dispatch_dtype(t, [&]<typename T>() {
    T* p = x.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = (rng() & 1) != 0;
      else if constexpr (std::is_integral_v<T>)
        p[i] = T(rng() & 1);
      else
        p[i] = T(u(rng));
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
