#include "plan/target.hpp"

#include "brrr/error.hpp"
#include "core/env.hpp"

namespace brrr::plan {

Target Target::cpu(bool onednn) {
  Target t;
  t.name = "cpu";
  t.library_f32_contractions = onednn;
  // As before Targets: the CPU splits convs over concats whether or not oneDNN fuses the sums.
  t.partial_convs = true;
  t.gemm_post_ops = onednn;
  t.gemm_strided_operands = onednn;
  t.gemm_operand_views = onednn && !env::flag("BRRR_NO_GEMM_VIEWS");
  t.gemm_gelu_tanh = onednn && !env::flag("BRRR_NO_GEMM_GELU_TANH");
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
  t.device = true;
  t.library_16bit_conv = true;
  t.library_16bit_row_reduce = true;
  t.library_gather = true;
  t.library_split = true;
  t.generated_casts = true;
  t.generated_typed = true;
  t.generated_views = true;
  return t;
}

bool Target::generates(ScalarOp op, DType t) const {
  if (!generated_typed) return false;
  using O = ScalarOp;
  switch (op) {  // both: what integer and float64 kernels share
    case O::Identity: case O::Add: case O::Sub: case O::Mul: case O::Div: case O::Where:
    case O::Equal: case O::Less: case O::LessOrEqual: case O::Greater: case O::GreaterOrEqual:
    case O::Min: case O::Max: case O::Neg: case O::Abs: case O::Not:
      return t == DType::i32 || t == DType::i64 || t == DType::f64;
    case O::ModNumpy: case O::ModFmod: case O::Sign:  // the integer forms
      return t == DType::i32 || t == DType::i64;
    case O::Pow: case O::Sqrt: case O::Reciprocal: case O::Exp: case O::Log: case O::Tanh:
    case O::Erf: case O::Cos: case O::Sin: case O::Floor: case O::Ceil:  // libm's double forms
      return t == DType::f64;
    default: return false;
  }
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
