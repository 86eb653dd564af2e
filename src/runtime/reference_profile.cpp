// profile_reference: the reference executor's loop with a timer around every node.
#include "brrr/reference_profile.hpp"

#include <algorithm>
#include <chrono>

#include "brrr/op.hpp"
#include "brrr/reference.hpp"
#include "core/median.hpp"

namespace brrr {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double value_bytes(const Value& v) {
  return v.typed ? double(v.nbytes()) : 0.0;
}

}  // namespace

RunProfile profile_reference(const Graph& g, const std::map<std::string, Tensor>& inputs,
                             int reps) {
  BRRR_CHECK(reps >= 1, "profile_reference: reps must be >= 1, got {}", reps);
  run_reference(g, inputs);  // warm-up; also checks the inputs' names, dtypes and shapes
  size_t nn = g.nodes.size();
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t k = 0; k < nn; ++k)
    for (int i : g.nodes[k].inputs)
      if (i >= 0) last_use[i] = int(k);
  for (int o : g.outputs) last_use[o] = int(nn);

  std::vector<std::vector<double>> times(nn), starts(nn);
  std::vector<double> walls;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::vector<Tensor> vals(g.values.size());
    for (size_t i = 0; i < g.values.size(); ++i)
      if (g.values[i].constant.defined()) vals[i] = g.values[i].constant;
    for (int id : g.inputs) vals[id] = inputs.at(g.value(id).name);
    for (size_t k = 0; k < nn; ++k) {
      const Node& n = g.nodes[k];
      std::vector<Tensor> ins;
      for (int i : n.inputs) ins.push_back(i >= 0 ? vals[i] : Tensor());
      auto a = Clock::now();
      std::vector<Tensor> outs = run_node_reference(g, n, std::move(ins));
      auto b = Clock::now();
      times[k].push_back(ms_between(a, b));
      starts[k].push_back(ms_between(t0, a));
      for (size_t o = 0; o < outs.size() && o < n.outputs.size(); ++o) vals[n.outputs[o]] = outs[o];
      for (int i : n.inputs)
        if (i >= 0 && last_use[i] == int(k) && !g.value(i).constant.defined()) vals[i] = Tensor();
    }
    walls.push_back(ms_between(t0, Clock::now()));
  }

  RunProfile p;
  p.backend = "reference";
  p.threads = 1;
  p.wall_ms = median(walls);
  p.wall_samples_ms = walls;
  p.kernels_in_wall_runs = true;
  // Start offsets come from the run closest to the median wall time.
  size_t rep_at = 0;
  for (size_t r = 0; r < walls.size(); ++r)
    if (std::abs(walls[r] - p.wall_ms) < std::abs(walls[rep_at] - p.wall_ms)) rep_at = r;
  for (size_t k = 0; k < nn; ++k) {
    const Node& n = g.nodes[k];
    KernelRecord rec;
    rec.name = n.name.empty() ? n.op + "_" + std::to_string(k) : n.name;
    rec.kind = "reference";
    rec.ops = {n.op};
    rec.nodes = {rec.name};
    rec.cls = n.def ? n.def->cls : OpClass::elementwise;
    rec.cost = op_cost(g, n);
    rec.time_ms = median(times[k]);
    rec.samples_ms = times[k];
    rec.start_ms = starts[k][rep_at];
    for (int i : n.inputs)
      if (i >= 0)
        rec.reads.push_back(
            {g.value(i).name, value_bytes(g.value(i)), g.value(i).constant.defined()});
    for (int o : n.outputs) rec.writes.push_back({g.value(o).name, value_bytes(g.value(o))});
    p.kernels.push_back(std::move(rec));
  }
  return p;
}

}  // namespace brrr
