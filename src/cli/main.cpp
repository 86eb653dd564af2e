#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "brrr/error.hpp"
#include "cli/commands.hpp"
#include "cli/version.hpp"
#include "core/env.hpp"

namespace {

// Every usage error is one line, like brrr's own errors: CLI11's message (its line breaks
// folded) and where the options of the command at fault are listed.
int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  std::string where = "brrr";
  for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
  std::fprintf(stderr, "brrr: error: %s (%s --help lists the options)\n", msg.c_str(),
               where.c_str());
  return 2;
}

// Arguments no option took: CLI11 lists them last first ("not expected: 100 --iterations");
// they are named here in the order they were typed.
int extras_error(const CLI::App& app, const CLI::ExtrasError& e, int argc, char** argv) {
  std::string msg = e.what();
  const size_t colon = msg.find(": ");
  if (colon == std::string::npos) return usage_error(app, e);
  std::vector<std::string> extra;
  std::string rest = msg.substr(colon + 2), word;
  for (char c : rest + " ")
    if (c == ' ' || c == '\n') {
      if (!word.empty()) extra.push_back(word), word.clear();
    } else {
      word += c;
    }
  std::string where = "brrr";
  for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
  // Where the command was typed: options before it are brrr's, which has none but --version.
  int command_at = argc;
  for (const CLI::App* sub : app.get_subcommands())
    for (int i = 1; i < argc && command_at == argc; ++i)
      if (sub->get_name() == argv[i]) command_at = i;
  std::vector<std::string> typed;
  bool before_command = false;
  for (int i = 1; i < argc; ++i) {
    auto it = std::find(extra.begin(), extra.end(), argv[i]);
    if (it == extra.end()) continue;
    before_command |= typed.empty() && i < command_at;
    typed.push_back(*it), extra.erase(it);
  }
  typed.insert(typed.end(), extra.begin(), extra.end());
  std::string list;
  for (const auto& w : typed) list += (list.empty() ? "" : " ") + w;
  const bool option = !typed.empty() && typed[0].rfind("-", 0) == 0;
  if (before_command)
    std::fprintf(stderr, "brrr: error: '%s' comes before the command: options follow it (%s %s "
                 "...; %s --help lists them)\n", list.c_str(), where.c_str(), list.c_str(),
                 where.c_str());
  else
    std::fprintf(stderr, "brrr: error: %s: %s (%s --help lists the options)\n",
                 option ? "unknown option" : "argument not expected", list.c_str(), where.c_str());
  return 2;
}

// `brrr help [COMMAND]`: the same text as --help.
void setup_help(CLI::App& app) {
  auto topic = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("help", "show this help, or a command's (brrr help run)");
  cmd->add_option("command", *topic, "the command to describe");
  cmd->callback([&app, topic] {
    // The formatter, not App::help(): that prints the selected subcommand's (this one's) help.
    if (topic->empty()) {
      std::cout << app.get_formatter()->make_help(&app, "brrr", CLI::AppFormatMode::Normal);
      return;
    }
    CLI::App* sub = nullptr;
    try {
      sub = app.get_subcommand(*topic);
    } catch (const CLI::OptionNotFound&) {
    }
    if (!sub || *topic == "help")
      brrr::fail("help: no command '{}' (the commands: run, bench, doctor, probe)", *topic);
    std::cout << sub->help("brrr");
  });
}

// oneDNN's OpenMP threads (libgomp) spin after each parallel region before they sleep: 300000
// pauses by default, 30-60 ms on a 2-core VM. On a busy machine a spinning thread takes the core
// that the other threads of brrr's pool or of the next kernel need, and a sleeping one that is
// woken is favoured by the scheduler over the processes that took the cores (2 busy cores, load
// 4-7, scripts/load_test.py: mobilenet_v3_small 72 -> 1.2 ms, and 1.35 -> 1.24 ms with a CPU hog
// per core; squeezenet1_1 loaded 28 -> 25 ms; bert_tiny, mlp_tiny alike). libgomp reads its
// settings once, when it loads, before main: so unless the user chose (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT), brrr sets a short spin, GOMP_SPINCOUNT=100000, and runs itself again. Not the
// passive policy (no spin at all): then a woken thread starts each region late and two threads ran
// no faster than one (squeezenet1_1 quiet, 2 threads: passive 3.22 ms, 100000 spins 1.68 ms, one
// thread 3.20 ms; with a CPU hog per core 3.77 against 3.53 ms; mobilenet_v3_small 0.92 / 1.00
// against 0.50 / 0.77 ms; scripts/load_test.py). Like ONNX Runtime's pool: spin briefly, then
// block. Returns only when it does not (already set, or the exec failed: libgomp's default then).
void default_openmp_wait_policy(char** argv) {
  if (brrr::env::raw("OMP_WAIT_POLICY") || brrr::env::raw("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", "100000", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace

int main(int argc, char** argv) {
  default_openmp_wait_policy(argv);
  CLI::App app{"brrr: find out why a model is slow, and make it fast", "brrr"};
  app.require_subcommand(1);
  app.set_version_flag("--version", brrr::cli::version_text, "print the version, git commit, "
                       "build type and the backends and libraries built in");
  // --help shows every option's default (CLI11 copies this into each subcommand).
  app.option_defaults()->always_capture_default();
  brrr::cli::setup_run(app);
  brrr::cli::setup_bench(app);
  brrr::cli::setup_probe(app);
  brrr::cli::setup_doctor(app);
  setup_help(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what();
    return 0;
  } catch (const CLI::RequiredError& e) {
    if (app.get_subcommands().empty()) {
      std::string what = argc < 2                ? std::string("give a command")
                         : argv[1][0] != '-' ? fmt::format("'{}' is not a command", argv[1])
                                             : fmt::format("'{}' is not an option of brrr; give "
                                                           "a command",
                                                           argv[1]);
      std::fprintf(stderr,
                   "brrr: error: %s: run, bench, doctor, probe or help (brrr --help describes "
                   "them)\n",
                   what.c_str());
      return 2;
    }
    return usage_error(app, e);
  } catch (const CLI::ExtrasError& e) {
    return extras_error(app, e, argc, argv);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
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
