#include "cli/commands.hpp"
#include "brrr/error.hpp"

namespace brrr::cli {

void setup_probe(CLI::App& app) {
  auto* cmd = app.add_subcommand("probe", "not implemented yet");
  cmd->callback([] { fail("'brrr probe' is not implemented yet"); });
}

}  // namespace brrr::cli
