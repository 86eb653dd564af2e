// Chrome trace-event JSON for Perfetto / chrome://tracing: one lane per thread or stream, each
// kernel a complete ("X") event whose args carry its flops, bytes, regime and efficiency.
#include <fmt/format.h>

#include <set>

#include "brrr/doctor.hpp"

namespace brrr::doctor {

using nlohmann::json;

json trace_json(const Report& r) {
  json ev = json::array();
  ev.push_back({{"name", "process_name"},
                {"ph", "M"},
                {"pid", 1},
                {"tid", 0},
                {"args", {{"name", fmt::format("brrr {} ({})", r.model, r.profile.backend)}}}});
  std::set<int> lanes;
  // Profiles without start offsets (synthetic, or executors that do not record them) are laid out
  // back to back so the trace still reads in execution order.
  bool have_starts = false;
  for (const auto& k : r.kernels) have_starts |= k.rec.start_ms > 0;
  double cursor = 0;
  for (const auto& k : r.kernels) {
    double start = have_starts ? k.rec.start_ms : cursor;
    cursor = start + k.rec.time_ms;
    lanes.insert(k.rec.lane);
    ev.push_back({{"name", k.rec.name},
                  {"cat", std::string(op_class_name(k.rec.cls))},
                  {"ph", "X"},
                  {"pid", 1},
                  {"tid", k.rec.lane},
                  {"ts", start * 1e3},
                  {"dur", k.rec.time_ms * 1e3},
                  {"args",
                   {{"ops", k.rec.ops},
                    {"kind", k.rec.kind},
                    {"flops", k.rec.cost.flops},
                    {"special", k.rec.cost.special},
                    {"bytes", k.rec.cost.bytes},
                    {"floor_ms", k.floor_ms},
                    {"regime", regime_name(k.regime)},
                    {"efficiency", k.efficiency}}}});
  }
  for (int l : lanes)
    ev.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", 1},
                  {"tid", l},
                  {"args", {{"name", fmt::format("lane {} ({})", l, r.profile.backend)}}}});
  return json{{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

}  // namespace brrr::doctor
