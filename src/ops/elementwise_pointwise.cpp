// expand_pointwise: turns an OpDef's pointwise template into the C expression of one node, so
// both code generators substitute inputs and attributes the same way (conventions in op.hpp).
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "brrr/op.hpp"

namespace brrr {

namespace {

std::string float_literal(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  std::string s = fmt::format("{:.9g}", float(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

std::string int_literal(int64_t v) {
  return v < 0 ? fmt::format("({})", v) : fmt::format("{}", v);
}

bool is_word(const std::string& s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') return false;
  return true;
}

// A number attribute as a C literal. Only numbers read through their type reach generated code:
// `want_int` (the template's default is an integer) takes INT, otherwise FLOAT or INT.
std::string number_literal(const Node& n, const std::string& name, bool want_int) {
  const AttrValue& a = n.attrs.at(name);
  if (const auto* i = std::get_if<int64_t>(&a)) return int_literal(*i);
  if (const auto* f = std::get_if<float>(&a); f && !want_int) return float_literal(*f);
  fail("{}: attribute '{}' must be {} for the pointwise expression", n.label(), name,
       want_int ? "an INT" : "a FLOAT or INT");
}

// {name=default}: a number attribute, `dflt` (template text) when absent.
std::string attr_literal(const Node& n, const std::string& name, const std::string* dflt) {
  bool want_int = false;
  if (dflt) {
    char* end = nullptr;
    double v = std::strtod(dflt->c_str(), &end);
    BRRR_ASSERT(!dflt->empty() && *end == '\0', "pointwise default is not a number");
    want_int = dflt->find_first_of(".eEnN") == std::string::npos;
    if (!n.has_attr(name)) return want_int ? int_literal(int64_t(v)) : float_literal(v);
  }
  BRRR_CHECK(n.has_attr(name), "{}: attribute '{}' is required for the pointwise expression",
             n.label(), name);
  return number_literal(n, name, want_int);
}

// {name@w0,w1,...}: a STRING (or INT) attribute that must be one of the template's own words,
// which is what is emitted (never the model's text); w0 when absent.
std::string attr_choice(const Node& n, const std::string& name, const std::string& words) {
  std::vector<std::string> choices;
  for (size_t p = 0; p <= words.size();) {
    size_t q = std::min(words.find(',', p), words.size());
    choices.push_back(words.substr(p, q - p));
    p = q + 1;
  }
  BRRR_ASSERT(!choices.empty() && is_word(choices[0]), "bad pointwise choice list");
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return choices[0];
  std::string got;
  if (const auto* s = std::get_if<std::string>(&it->second))
    got = *s;
  else if (const auto* i = std::get_if<int64_t>(&it->second))
    got = std::to_string(*i);
  else
    fail("{}: attribute '{}' has the wrong type for the pointwise expression", n.label(), name);
  for (const auto& c : choices)
    if (c == got) return c;
  fail("{}: attribute '{}' = '{}' is not one of {}", n.label(), name, got.substr(0, 40), words);
}

std::string substitute(const std::string& tpl, const Node& n,
                       const std::vector<std::string>& args) {
  auto present = [&](size_t i) {
    return i < args.size() && !args[i].empty() && (i >= n.inputs.size() || n.inputs[i] >= 0);
  };
  auto arg = [&](size_t i) { return is_word(args[i]) ? args[i] : "(" + args[i] + ")"; };
  std::string out;
  for (size_t p = 0; p < tpl.size();) {
    if (tpl[p] != '{') {
      out += tpl[p++];
      continue;
    }
    size_t q = tpl.find('}', p);
    BRRR_ASSERT(q != std::string::npos, "unterminated placeholder in a pointwise template");
    std::string tok = tpl.substr(p + 1, q - p - 1);
    p = q + 1;
    size_t bar = tok.find('|'), eq = tok.find('='), at = tok.find('@');
    if (!tok.empty() && std::isdigit(static_cast<unsigned char>(tok[0]))) {
      size_t i = std::stoul(tok);
      if (present(i))
        out += arg(i);
      else if (bar != std::string::npos && n.has_attr(tok.substr(bar + 1)))
        out += number_literal(n, tok.substr(bar + 1), false);
      else
        out += "NAN";
    } else if (at != std::string::npos) {
      out += attr_choice(n, tok.substr(0, at), tok.substr(at + 1));
    } else if (eq != std::string::npos) {
      std::string dflt = tok.substr(eq + 1);
      out += attr_literal(n, tok.substr(0, eq), &dflt);
    } else {
      out += attr_literal(n, tok, nullptr);
    }
  }
  return out;
}

}  // namespace

std::string expand_pointwise(const OpDef& def, const Node& n,
                             const std::vector<std::string>& args) {
  BRRR_CHECK(!def.pointwise.empty(), "{}: op {} has no pointwise form", n.label(), def.name);
  bool variadic =
      def.domain.empty() && (def.name == "Sum" || def.name == "Min" || def.name == "Max");
  if (!variadic) return substitute(def.pointwise, n, args);
  BRRR_CHECK(!args.empty(), "{}: no inputs", n.label());
  std::string acc = args[0];
  for (size_t i = 1; i < args.size(); ++i) acc = substitute(def.pointwise, n, {acc, args[i]});
  return acc;
}

}  // namespace brrr
