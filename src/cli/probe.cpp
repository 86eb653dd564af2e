// `brrr probe`: measure (or show the cached) ceilings of this machine.
#include <fmt/format.h>

#include <fstream>

#include "brrr/doctor.hpp"
#include "brrr/error.hpp"
#include "cli/commands.hpp"
#include "core/file_io.hpp"

namespace brrr::cli {

void setup_probe(CLI::App& app) {
  struct Opts {
    std::string backend = "cpu", json;
    bool refresh = false;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("probe", "measure this machine's ceilings (cached per machine)");
  cmd->add_option("--backend", opts->backend, "backend to probe")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--json", opts->json, "also write the ceilings as JSON to this file");
  cmd->add_flag("--refresh", opts->refresh, "measure again even when cached");
  cmd->callback([opts] {
    if (!opts->json.empty()) check_output_path(opts->json, "--json");
    bool cached = false;
    std::string cache_error;
    doctor::Ceilings c =
        doctor::load_or_probe(opts->backend, opts->refresh, true, &cached, &cache_error);
    if (cached)
      fmt::print(stderr, "probe: cached ceilings from {} (--refresh measures again)\n",
                 doctor::ceilings_cache_path(opts->backend));
    fmt::print("{}", doctor::render_ceilings(c));
    if (!opts->json.empty()) {
      write_file(opts->json, doctor::ceilings_to_json(c).dump(2) + "\n");
    }
    // Caching is this command's job: failing to is an error (doctor only warns).
    if (!cache_error.empty()) fail("probe: the ceilings were not cached: {}", cache_error);
  });
}

}  // namespace brrr::cli
