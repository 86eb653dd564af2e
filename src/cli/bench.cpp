#include "cli/commands.hpp"
#include "brrr/error.hpp"

namespace brrr::cli {

void setup_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "not implemented yet");
  cmd->callback([] { fail("'brrr bench' is not implemented yet"); });
}

}  // namespace brrr::cli
