// Einsum: a general product-sum over labelled axes (numpy semantics: repeated labels in one operand
// take the diagonal, "..." broadcasts, implicit output = labels used once, in alphabetical order).
// The reference kernel walks every label combination once; simple, and fine for the small
// contractions Einsum usually expresses outside of MatMul.
#include <algorithm>
#include <cctype>

#include "ops/window.hpp"

namespace brrr {
using namespace ops;

namespace {

constexpr int kEllipsisBase = 256;  // label ids >= this are ellipsis dims; below are char codes

struct EinsumPlan {
  std::map<int, int64_t> size;              // label -> extent
  std::vector<std::vector<int>> op_labels;  // per operand, per axis
  std::vector<int> out, red;                // output labels, then summed labels
  Shape out_shape() const {
    Shape s;
    for (int l : out) s.push_back(size.at(l));
    return s;
  }
};

// Parses one term into labels; `ellipsis_rank` dims replace "..." (right-aligned ellipsis ids).
std::vector<int> parse_term(const std::string& term, int64_t rank, int ell_total, bool in_output,
                            int& ell_rank_out) {
  std::vector<int> labels;
  size_t dots = term.find("...");
  if (dots != std::string::npos && term.find("...", dots + 1) != std::string::npos)
    fail("Einsum term '{}' has more than one '...'", term);
  if (std::count(term.begin(), term.end(), '.') != (dots == std::string::npos ? 0 : 3))
    fail("Einsum term '{}' has a '.' outside of '...'", term);
  int letters = 0;
  for (char ch : term)
    if (std::isalpha(static_cast<unsigned char>(ch)))
      letters++;
    else if (ch != '.')
      fail("Einsum term '{}' has the invalid character '{}'", term, ch);
  int64_t ell = 0;
  if (dots != std::string::npos)
    ell = in_output ? ell_total : rank - letters;
  else if (!in_output && rank != letters)
    fail("Einsum term '{}' names {} axes but its operand has rank {}", term, letters, rank);
  if (ell < 0) fail("Einsum term '{}' names more axes than its operand's rank {}", term, rank);
  ell_rank_out = int(ell);
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      for (int64_t e = 0; e < ell; ++e) labels.push_back(kEllipsisBase + int(ell_total - ell + e));
      i += 2;
    } else {
      labels.push_back(term[i]);
    }
  }
  return labels;
}

EinsumPlan einsum_plan(std::string eq, const std::vector<Shape>& shapes) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t c = lhs.find(',', p);
    terms.push_back(lhs.substr(p, c == std::string::npos ? std::string::npos : c - p));
    if (c == std::string::npos) break;
    p = c + 1;
  }
  if (terms.size() != shapes.size())
    fail("Einsum equation '{}' has {} operand terms but the node has {} inputs", eq, terms.size(),
         shapes.size());
  // Largest ellipsis rank over the operands (ellipsis dims broadcast, right-aligned).
  int ell_total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = std::count_if(terms[i].begin(), terms[i].end(),
                                    [](char ch) { return std::isalpha((unsigned char)ch); });
    if (terms[i].find("...") != std::string::npos)
      ell_total = std::max<int>(ell_total, int(int64_t(shapes[i].size()) - letters));
  }
  EinsumPlan p;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    int er;
    std::vector<int> labels = parse_term(terms[i], int64_t(shapes[i].size()), ell_total, false, er);
    for (size_t a = 0; a < labels.size(); ++a) {
      int l = labels[a];
      int64_t n = shapes[i][a];
      auto it = p.size.find(l);
      if (it == p.size.end()) {
        p.size[l] = n;
      } else if (it->second != n) {
        if (l >= kEllipsisBase && (n == 1 || it->second == 1))
          it->second = std::max(n, it->second);
        else
          fail("Einsum label '{}' has extent {} in one operand and {} in another ('{}')",
               l >= kEllipsisBase ? std::string("...") : std::string(1, char(l)), it->second, n,
               eq);
      }
      uses[l]++;
    }
    p.op_labels.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    int er;
    p.out = parse_term(eq.substr(arrow + 2), 0, ell_total, true, er);
    for (int l : p.out) {
      if (!p.size.count(l))
        fail("Einsum output label '{}' does not appear in any operand ('{}')", char(l), eq);
      if (std::count(p.out.begin(), p.out.end(), l) > 1)
        fail("Einsum output label '{}' appears twice ('{}')", char(l), eq);
    }
  } else {
    for (int e = 0; e < ell_total; ++e) p.out.push_back(kEllipsisBase + e);
    for (const auto& [l, n] : uses)  // std::map: ascending char code, as numpy sorts
      if (l < kEllipsisBase && n == 1) p.out.push_back(l);
  }
  for (const auto& [l, n] : p.size)
    if (std::find(p.out.begin(), p.out.end(), l) == p.out.end()) p.red.push_back(l);
  return p;
}

template <typename In, typename Acc, typename Out>
void einsum_kernel(const EinsumPlan& p, const std::vector<Tensor>& xs, Tensor& out) {
  size_t nops = xs.size();
  std::vector<int> all = p.out;
  all.insert(all.end(), p.red.begin(), p.red.end());
  size_t nl = all.size();
  // stride[k][j]: element step of operand k when label all[j] advances (summed over repeated
  // labels: the diagonal; 0 on broadcast unit dims).
  std::vector<std::vector<int64_t>> stride(nops, std::vector<int64_t>(nl, 0));
  std::vector<const In*> ptr(nops);
  for (size_t k = 0; k < nops; ++k) {
    ptr[k] = xs[k].data<In>();
    Shape st = contiguous_strides(xs[k].shape());
    for (size_t a = 0; a < p.op_labels[k].size(); ++a) {
      if (xs[k].shape()[a] == 1) continue;
      size_t j = std::find(all.begin(), all.end(), p.op_labels[k][a]) - all.begin();
      stride[k][j] += st[a];
    }
  }
  std::vector<int64_t> ext(nl);
  for (size_t j = 0; j < nl; ++j) ext[j] = p.size.at(all[j]);
  int64_t O = out.numel(), R = 1;
  for (int l : p.red) R *= p.size.at(l);
  Out* o = out.data<Out>();
  if (R == 0) {
    for (int64_t i = 0; i < O; ++i) o[i] = Out(0.0f);
    return;
  }
  std::vector<int64_t> idx(nl, 0), off(nops, 0);
  for (int64_t oi = 0; oi < O; ++oi) {
    Acc acc = 0;
    for (int64_t r = 0; r < R; ++r) {
      Acc prod = 1;
      for (size_t k = 0; k < nops; ++k) prod *= Acc(ptr[k][off[k]]);
      acc += prod;
      for (int j = int(nl) - 1; j >= 0; --j) {  // odometer, last label fastest
        if (++idx[j] < ext[j]) {
          for (size_t k = 0; k < nops; ++k) off[k] += stride[k][j];
          break;
        }
        for (size_t k = 0; k < nops; ++k) off[k] -= stride[k][j] * (ext[j] - 1);
        idx[j] = 0;
      }
    }
    if constexpr (std::is_same_v<Out, f16> || std::is_same_v<Out, bf16>)
      o[oi] = Out(float(acc));
    else
      o[oi] = Out(acc);
  }
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& xs) {
  std::vector<Shape> s;
  for (const Tensor& x : xs) s.push_back(x.shape());
  return s;
}

}  // namespace

void register_einsum_op(OpTable& t) {
  OpDef d;
  d.name = "Einsum";
  d.cls = OpClass::contraction;
  d.infer = [](InferCtx& c) {
    require_same_dtype(c);
    DType dt = c.in_dtype(0);
    if (!is_float_dtype(dt) && dt != DType::i32 && dt != DType::i64)
      c.fail("Einsum does not support {} inputs", dtype_name(dt));
    if (!c.node.has_attr("equation")) c.fail("Einsum needs the equation attribute");
    std::vector<Shape> shapes;
    for (int i = 0; i < c.num_inputs(); ++i) shapes.push_back(c.in_shape(i));
    EinsumPlan p;
    try {
      p = einsum_plan(c.node.attr_string("equation", ""), shapes);
    } catch (const Error& e) {
      c.fail_msg(e.what());
    }
    c.set_output(0, dt, p.out_shape());
  };
  d.reference = [](KernelCtx& k) {
    EinsumPlan p = einsum_plan(k.node.attr_string("equation", ""), shapes_of(k.inputs));
    DType dt = k.inputs[0].dtype();
    if (dt == DType::i32 || dt == DType::i64) {
      std::vector<Tensor> xs;
      for (const Tensor& x : k.inputs) xs.push_back(x.contiguous());
      if (dt == DType::i32)
        einsum_kernel<int32_t, uint64_t, int32_t>(p, xs, k.outputs[0]);
      else
        einsum_kernel<int64_t, uint64_t, int64_t>(p, xs, k.outputs[0]);
      return;
    }
    dispatch_float_kernel(k, [&]<typename In, typename Out>(std::vector<Tensor> xs) {
      einsum_kernel<In, double, Out>(p, xs, k.outputs[0]);
    });
  };
  d.cost = [](const Graph& g, const Node& n) {
    std::vector<Shape> shapes;
    for (int i : n.inputs) shapes.push_back(g.value(i).shape);
    EinsumPlan p = einsum_plan(n.attr_string("equation", ""), shapes);
    double points = 1;
    for (const auto& [l, e] : p.size) points *= double(e);
    Cost c;
    c.flops = n.inputs.size() <= 1 ? points : 2.0 * double(n.inputs.size() - 1) * points;
    return c;
  };
  t.add(std::move(d));
}

}  // namespace brrr
