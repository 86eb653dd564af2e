#include <cstdio>
#include <exception>

#include "brrr/error.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"brrr: find out why a model is slow, and make it fast"};
  app.require_subcommand(1);
  brrr::cli::setup_run(app);
  brrr::cli::setup_bench(app);
  brrr::cli::setup_probe(app);
  brrr::cli::setup_doctor(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const brrr::Error& e) {
    std::fprintf(stderr, "brrr: error: %s\n", e.what());
    return 2;
  } catch (const brrr::cli::ExitWith& e) {
    return e.code;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "brrr: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {  // anything a library throws on hostile input
    std::fprintf(stderr, "brrr: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
