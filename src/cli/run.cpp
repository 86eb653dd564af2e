#include "cli/commands.hpp"
#include "brrr/error.hpp"

namespace brrr::cli {

void setup_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "not implemented yet");
  cmd->callback([] { fail("'brrr run' is not implemented yet"); });
}

}  // namespace brrr::cli
