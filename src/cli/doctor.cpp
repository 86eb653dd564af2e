#include "cli/commands.hpp"
#include "brrr/error.hpp"

namespace brrr::cli {

void setup_doctor(CLI::App& app) {
  auto* cmd = app.add_subcommand("doctor", "not implemented yet");
  cmd->callback([] { fail("'brrr doctor' is not implemented yet"); });
}

}  // namespace brrr::cli
