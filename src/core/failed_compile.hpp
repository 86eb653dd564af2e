// Where a failed kernel compile's source and compiler log are kept, for one-line errors that name
// them: the dump folder when one is set (it holds every source anyway), else <cache>/failed,
// which keeps the latest 4 failures only (sources can be megabytes).
#pragma once
#include <string>

namespace brrr {

struct KeptFailure {
  std::string source, log;  // paths, or "(not kept: why)" / "(none)"
};

// `file`: the source's name in the folder (its log: the same with a .log extension). `src_file`:
// the source already on disk (moved there, or removed), or "" to write `source`.
KeptFailure keep_failed_compile(const std::string& dump_dir, const std::string& cache_dir,
                                const std::string& file, const std::string& src_file,
                                const std::string& source, const std::string& log);

// The first log line that says "error" (else the first non-empty one), at most 300 characters.
std::string first_error_line(const std::string& log);

}  // namespace brrr
