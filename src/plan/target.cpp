#include "plan/target.hpp"

#include "brrr/error.hpp"

namespace brrr::plan {

Target Target::cpu(bool onednn) {
  Target t;
  t.name = "cpu";
  t.library_f32_contractions = onednn;
  // As before Targets: the CPU splits convs over concats whether or not oneDNN fuses the sums.
  t.partial_convs = true;
  t.gemm_post_ops = onednn;
  t.gemm_strided_operands = onednn;
  return t;
}

Target Target::cpu() {
#ifdef BRRR_HAVE_DNNL
  return cpu(true);
#else
  return cpu(false);
#endif
}

Target Target::cuda() {
  Target t;
  t.name = "cuda";
  t.generated_16bit = true;
  t.generated_bool = true;
  t.library_f32_contractions = true;
  t.library_16bit_gemm = true;
  t.library_16bit_pool = true;
  return t;
}

Target Target::reference() {
  Target t;
  t.name = "reference";
  t.plans_kernels = false;
  return t;
}

Target Target::named(const std::string& backend) {
  if (backend == "cpu") return cpu();
  if (backend == "cuda") return cuda();
  if (backend == "reference") return reference();
  fail("unknown backend '{}' (use cpu or cuda)", backend);
}

}  // namespace brrr::plan
