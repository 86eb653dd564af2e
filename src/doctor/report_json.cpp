// Machine-readable outputs: the report (--json, stable keys) and RunProfile files (--compare).
#include <cmath>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"

namespace brrr::doctor {

using nlohmann::json;

namespace {

json kernel_json(const KernelAnalysis& k) {
  return json{{"name", k.rec.name},
              {"kind", k.rec.kind},
              {"ops", k.rec.ops},
              {"class", std::string(op_class_name(k.rec.cls))},
              {"flops", k.rec.cost.flops},
              {"special", k.rec.cost.special},
              {"bytes", k.rec.cost.bytes},
              {"time_ms", k.rec.time_ms},
              {"p10_ms", k.p10_ms},
              {"p90_ms", k.p90_ms},
              {"floor_ms", k.floor_ms},
              {"memory_floor_ms", k.memory_floor_ms},
              {"compute_floor_ms", k.compute_floor_ms},
              {"overhead_ms", k.overhead_ms},
              {"efficiency", k.efficiency},
              {"roof", k.roof},
              {"roof_gbs", k.roof_gbs},
              {"streamed_weight_bytes", k.streamed_weight_bytes},
              {"over_roof_reason", k.over_reason},
              {"outlier_note", k.outlier_note},
              {"grid_ctas", k.rec.grid_ctas},
              {"gpu_activity_names", k.rec.gpu_activity_names},
              {"grid_note", k.grid_note},
              {"layout_note", k.rec.layout_note},
              {"regime", regime_name(k.regime)},
              {"fused_from", k.rec.nodes},
              {"boundaries", k.rec.boundaries}};
}

json attribution_json(const Attribution& a) {
  return json{{"wall_ms", a.wall_ms},
              {"compute_ms", a.compute_ms},
              {"memory_ms", a.memory_ms},
              {"overhead_ms", a.overhead_ms},
              {"gap_ms", a.gap_ms},
              {"slow_ms", a.slow_ms},
              {"shares",
               {{"compute", a.share(Regime::compute)},
                {"memory", a.share(Regime::memory)},
                {"overhead", a.share(Regime::overhead)}}}};
}

json classes_json(const std::vector<ClassRow>& rows) {
  json j = json::array();
  for (const auto& r : rows)
    j.push_back({{"class", r.cls},
                 {"kernels", r.kernels},
                 {"flops", r.flops},
                 {"special", r.special},
                 {"bytes", r.bytes},
                 {"time_ms", r.time_ms},
                 {"flops_share", r.flops_share},
                 {"time_share", r.time_share}});
  return j;
}

}  // namespace

json report_json(const Report& r) {
  json j;
  j["model"] = r.model;
  j["backend"] = r.profile.backend;
  if (r.profile.threads > 0) j["threads"] = r.profile.threads;
  j["conventions"] = {{"flops", "2 per multiply-add, 1 per other scalar arithmetic op"},
                      {"special", "counted per function, priced at measured throughput"},
                      {"bytes", "compulsory: each input read once, each output written once"},
                      {"ceilings", "measured on this machine by brrr probe"}};
  j["wall_ms"] = r.attribution.wall_ms;
  j["timing"] = r.timing;
  j["attribution"] = attribution_json(r.attribution);
  j["shares"] = j["attribution"]["shares"];
  j["kernels"] = json::array();
  for (const auto& k : r.kernels) j["kernels"].push_back(kernel_json(k));
  j["ceilings"] = ceilings_to_json(r.ceilings);
  j["class_table"] = classes_json(r.classes);
  if (r.cache)
    j["cache_check"] = {{"kernels", r.cache->kernels},     {"in_runs_ms", r.cache->in_runs_ms},
                        {"hot_ms", r.cache->hot_ms},       {"gap_ms", r.cache->gap_ms()},
                        {"bytes", r.cache->bytes},         {"streams", r.cache->streams},
                        {"worst", r.cache->worst}};
  if (r.grids)
    j["small_grids"] = {{"kernels", r.grids->kernels}, {"time_ms", r.grids->time_ms},
                        {"sms", r.grids->sms},         {"worst", r.grids->worst},
                        {"text", small_grids_text(*r.grids, r.attribution.wall_ms)}};
  if (r.gaps)
    j["idle_gaps"] = {{"total_ms", r.gaps->total_ms},
                      {"boundaries", r.gaps->boundaries},
                      {"worst", r.gaps->worst},
                      {"text", idle_gaps_text(*r.gaps, r.attribution.wall_ms)}};
  if (r.batch) {
    json pts = json::array();
    for (const auto& p : r.batch->points) pts.push_back({{"batch", p.batch}, {"ms", p.ms}});
    j["batch_scaling"] = {{"points", pts},
                          {"fixed_ms", r.batch->fixed_ms},
                          {"per_item_ms", r.batch->per_item_ms},
                          {"growth", r.batch->growth},
                          {"fixed_share", r.batch->fixed_share},
                          {"r2", r.batch->r2},
                          {"max_residual", std::isfinite(r.batch->max_residual)
                                               ? json(r.batch->max_residual)
                                               : json(nullptr)},
                          {"exponent", r.batch->exponent},
                          {"power_r2", r.batch->power_r2},
                          {"power_max_residual", std::isfinite(r.batch->power_max_residual)
                                                     ? json(r.batch->power_max_residual)
                                                     : json(nullptr)},
                          {"growth_class", growth_name(r.batch->growth_class)},
                          {"overhead_bound", r.batch->overhead_bound},
                          {"other_busy_cpus", r.batch->other_busy_cpus >= 0
                                                  ? json(r.batch->other_busy_cpus)
                                                  : json(nullptr)},
                          {"verdict", r.batch->verdict}};
  } else {
    j["batch_scaling"] = nullptr;
    if (!r.batch_error.empty()) j["batch_scaling_error"] = r.batch_error;
  }
  j["remedies"] = json::array();
  for (const auto& rm : r.remedies)
    j["remedies"].push_back(
        {{"name", rm.name},
         {"gain_ms", rm.gain_ms},
         {"predicted_ms", rm.predicted_ms},
         {"measured_ms", rm.measured_ms ? json(*rm.measured_ms) : json(nullptr)},
         {"in_effect", rm.in_effect},
         {"action", rm.action},
         {"applicable", rm.applicable},
         {"kernels", rm.kernels},
         {"nodes", rm.nodes},
         {"boundaries", rm.boundaries},
         {"detail", rm.detail}});
  j["verdict"] = {{"regime", regime_name(r.verdict.regime)}, {"advice", r.verdict.advice}};
  const Reliability& t = r.reliability;
  j["reliability"] = {{"reliable", t.reliable},
                      {"reasons", t.reasons},
                      {"samples", t.samples},
                      {"wall_p10_ms", t.wall_p10_ms},
                      {"wall_p90_ms", t.wall_p90_ms},
                      {"other_busy_cpus", t.other_busy_cpus < 0 ? json(nullptr)
                                                                : json(t.other_busy_cpus)},
                      {"online_cpus", t.online_cpus},
                      {"threads", t.threads},
                      {"cpu_capacity", t.cpu_capacity < 0 ? json(nullptr) : json(t.cpu_capacity)}};
  j["checks"] = json::array();
  for (const auto& k : r.checks)
    j["checks"].push_back({{"remedy", k.remedy},
                           {"how", k.how},
                           {"before_ms", k.before_ms},
                           {"predicted_ms", k.predicted_ms},
                           {"measured_ms", k.measured_ms},
                           {"error", k.error()},
                           {"before_steady_ms", k.before_steady_ms},
                           {"predicted_steady_ms", k.predicted_steady_ms},
                           {"measured_steady_ms", k.measured_steady_ms},
                           {"steady_error", k.steady_error()},
                           {"library_before_ms", k.library_before_ms},
                           {"library_after_ms", k.library_after_ms},
                           {"library_alone_ms", k.library_alone_ms >= 0
                                                    ? json(k.library_alone_ms)
                                                    : json(nullptr)},
                           {"action", k.action},
                           {"changes", k.changes},
                           {"unreliable", k.unreliable}});
  if (r.after) {
    json k = json::array();
    for (const auto& a : r.after_kernels) k.push_back(kernel_json(a));
    j["compare"] = {{"backend", r.after_profile->backend},
                    {"attribution", attribution_json(*r.after)},
                    {"class_table", classes_json(r.after_classes)},
                    {"kernels", k}};
  }
  return j;
}

json profile_to_json(const RunProfile& p) {
  json ks = json::array();
  for (const auto& k : p.kernels) {
    json reads = json::array(), writes = json::array();
    for (const auto& u : k.reads) {
      reads.push_back({{"name", u.name}, {"bytes", u.bytes}});
      if (u.constant) reads.back()["constant"] = true;
    }
    for (const auto& u : k.writes) writes.push_back({{"name", u.name}, {"bytes", u.bytes}});
    ks.push_back({{"name", k.name},
                  {"kind", k.kind},
                  {"ops", k.ops},
                  {"nodes", k.nodes},
                  {"class", std::string(op_class_name(k.cls))},
                  {"flops", k.cost.flops},
                  {"special", k.cost.special},
                  {"bytes", k.cost.bytes},
                  {"time_ms", k.time_ms},
                  {"samples_ms", k.samples_ms},
                  {"start_samples_ms", k.start_samples_ms},
                  {"gpu_activities", k.gpu_activities},
                  {"gpu_activity_names", k.gpu_activity_names},
                  {"grid_ctas", k.grid_ctas},
                  {"start_ms", k.start_ms},
                  {"lane", k.lane},
                  {"reads", reads},
                  {"writes", writes},
                  {"boundaries", k.boundaries},
                  {"layout_note", k.layout_note}});
  }
  return json{{"backend", p.backend},
              {"wall_ms", p.wall_ms},
              {"wall_samples_ms", p.wall_samples_ms},
              {"kernels_in_wall_runs", p.kernels_in_wall_runs},
              {"timing_source", p.timing_source},
              {"threads", p.threads},
              {"other_busy_cpus", p.other_busy_cpus},
              {"online_cpus", p.online_cpus},
              {"cpu_capacity", p.cpu_capacity},
              {"kernels", ks}};
}

RunProfile profile_from_json(const json& j) {
  RunProfile p;
  try {
    p.backend = j.value("backend", "");
    p.wall_ms = j.at("wall_ms").get<double>();
    p.wall_samples_ms = j.value("wall_samples_ms", std::vector<double>{});
    p.kernels_in_wall_runs = j.value("kernels_in_wall_runs", false);
    p.timing_source = j.value("timing_source", "");
    p.threads = j.value("threads", 0);
    p.other_busy_cpus = j.value("other_busy_cpus", -1.0);
    p.online_cpus = j.value("online_cpus", 0);
    p.cpu_capacity = j.value("cpu_capacity", -1.0);
    for (const auto& kj : j.at("kernels")) {
      KernelRecord k;
      k.name = kj.value("name", "");
      k.kind = kj.value("kind", "");
      k.ops = kj.value("ops", std::vector<std::string>{});
      k.nodes = kj.value("nodes", std::vector<std::string>{});
      k.boundaries = kj.value("boundaries", std::vector<std::string>{});
      k.layout_note = kj.value("layout_note", "");
      std::string cls = kj.value("class", "elementwise");
      k.cls = cls == "contraction"     ? OpClass::contraction
              : cls == "normalization" ? OpClass::normalization
              : cls == "movement"      ? OpClass::movement
                                       : OpClass::elementwise;
      k.cost.flops = kj.value("flops", 0.0);
      k.cost.special = kj.value("special", std::map<std::string, double>{});
      k.cost.bytes = kj.value("bytes", 0.0);
      k.time_ms = kj.at("time_ms").get<double>();
      k.samples_ms = kj.value("samples_ms", std::vector<double>{});
      k.start_samples_ms = kj.value("start_samples_ms", std::vector<double>{});
      k.gpu_activities = kj.value("gpu_activities", 0);
      k.gpu_activity_names = kj.value("gpu_activity_names", std::vector<std::string>{});
      k.grid_ctas = std::max<int64_t>(0, kj.value("grid_ctas", int64_t(0)));
      k.start_ms = kj.value("start_ms", 0.0);
      k.lane = kj.value("lane", 0);
      for (const auto& u : kj.value("reads", json::array()))
        k.reads.push_back({u.at("name").get<std::string>(), u.at("bytes").get<double>(),
                           u.value("constant", false)});
      for (const auto& u : kj.value("writes", json::array()))
        k.writes.push_back({u.at("name").get<std::string>(), u.at("bytes").get<double>()});
      p.kernels.push_back(std::move(k));
    }
  } catch (const json::exception& e) {
    fail("profile file is malformed: {}", e.what());
  }
  return p;
}

}  // namespace brrr::doctor
