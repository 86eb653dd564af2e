// Options that run, bench and doctor share, read by one rule each: input shapes (and what a
// symbolic dim left open becomes), CPU threads and precision, output paths.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "brrr/graph.hpp"

namespace brrr::cli {

// --shape values. Each is "NAME:1x3x224x224" (dims also "1,3,224,224"; "NAME:" is a scalar) or
// several of them comma-separated in trtexec's --shapes style ("a:1x3x224x224,b:1x128"); the
// option may also repeat. A name may itself contain ':' (the last one splits). Fails on a bad
// dim, an overflowing shape or a name given twice.
std::map<std::string, Shape> parse_shape_args(const std::vector<std::string>& args);

// The one rule for symbolic input dims in run, bench and doctor: an input whose declared shape
// has symbolic dims and that `shapes` (from --shape or --data) leaves open gets 1 for each, and
// stderr gets one note per such input with the --shape that sets it, e.g.
//   brrr: note: input 'x' has symbolic dims [batch, 3]; using --shape x:1x3
// Fails when `shapes` names something that is not an input of the model.
void bind_symbolic_dims(const Graph& g, std::map<std::string, Shape>& shapes);

// "[batch, 3]": a declared shape with its symbolic dims by name ("?" when unnamed).
std::string declared_shape(const Value& v);

// --threads N (0: the default) as a CPU session's SessionOptions::threads: N when given, else
// BRRR_THREADS when set (0, the session reads it), else OpenMP's count (OMP_NUM_THREADS, else the
// CPUs of the affinity mask), so that OMP_NUM_THREADS=1 runs, and reports, one thread.
int session_threads(int flag);

// --threads and --precision are CPU-only and CUDA-only settings: a value the backend would ignore
// is refused with one line instead (the CPU runs float32 only).
void check_backend_options(const std::string& backend, int threads, const std::string& precision);

// The shared option definitions, so that help text and checks read the same in every subcommand.
CLI::Option* add_shape_option(CLI::App* cmd, std::vector<std::string>& shapes);
CLI::Option* add_threads_option(CLI::App* cmd, int& threads);

// --save-plan FILE and --load-plan FILE (plan_file.hpp), shared by run and bench.
void add_plan_options(CLI::App* cmd, std::string& save_plan, std::string& load_plan);
// Before any work: plan files are CPU-only, --save-plan's path can be written, --load-plan's exists.
void check_plan_options(const std::string& backend, const std::string& save_plan,
                        const std::string& load_plan);

// A folder brrr will write files into: it may exist (a folder) or be creatable (its parent is a
// writable folder). Fails naming `what` (e.g. "--save-outputs"); creates nothing.
void check_output_dir(const std::string& dir, const std::string& what);

}  // namespace brrr::cli
