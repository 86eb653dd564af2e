#include "core/failed_compile.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/file_io.hpp"

namespace brrr {

namespace fs = std::filesystem;

namespace {
constexpr size_t kFailuresKept = 4;
}

KeptFailure keep_failed_compile(const std::string& dump_dir, const std::string& cache_dir,
                                const std::string& file, const std::string& src_file,
                                const std::string& source, const std::string& log) {
  static std::mutex mu;  // one pruner at a time in this process
  std::lock_guard<std::mutex> lock(mu);
  std::error_code ec;
  fs::path dir = dump_dir.empty() ? fs::path(cache_dir) / "failed" : fs::path(dump_dir);
  fs::create_directories(dir, ec);
  if (dump_dir.empty()) {
    std::vector<std::pair<fs::file_time_type, fs::path>> old;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() != ".log") old.push_back({e.last_write_time(ec), e.path()});
    std::sort(old.begin(), old.end());
    for (size_t i = 0; i + kFailuresKept <= old.size(); ++i) {
      fs::remove(old[i].second, ec);
      fs::remove(fs::path(old[i].second).replace_extension(".log"), ec);
    }
  }
  KeptFailure k{(dir / file).string(), (dir / file).replace_extension(".log").string()};
  std::string why;
  bool have = !dump_dir.empty() && fs::is_regular_file(k.source, ec);
  if (!have && !src_file.empty() && ::rename(src_file.c_str(), k.source.c_str()) == 0) have = true;
  if (!have && !try_write_file(k.source, source, &why)) k.source = "(not kept: " + why + ")";
  if (!src_file.empty()) ::unlink(src_file.c_str());
  if (log.empty())
    k.log = "(none)";
  else if (!try_write_file(k.log, log, &why))
    k.log = "(not kept: " + why + ")";
  return k;
}

std::string first_error_line(const std::string& log) {
  std::string first, line;
  std::istringstream in(log);
  while (std::getline(in, line)) {
    if (first.empty() && line.find_first_not_of(" \t\r") != std::string::npos) first = line;
    if (line.find("error") != std::string::npos) {
      first = line;
      break;
    }
  }
  if (first.size() > 300) first = first.substr(0, 300) + "...";
  return first.empty() ? "(no output)" : first;
}

}  // namespace brrr
