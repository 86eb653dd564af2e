#include "backend/cpu/compile_parts.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace brrr::cpu {

std::vector<std::shared_ptr<CompiledModule>> compile_parts(const std::vector<std::string>& parts,
                                                           const CompileOptions& opts) {
  std::vector<std::shared_ptr<CompiledModule>> mods(parts.size());
  std::vector<std::exception_ptr> errs(parts.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < parts.size();) {
      try {
        mods[i] = compile_cpp(parts[i], opts);
      } catch (...) {
        errs[i] = std::current_exception();
      }
    }
  };
  size_t n = std::min<size_t>(parts.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
  return mods;
}

}  // namespace brrr::cpu
