// Files brrr writes and untrusted files it reads. Writes go to a temp file in the same folder
// (every write, fsync and close checked) renamed into place, so a failure never leaves a partial
// or empty file under the final name. Reads open regular files only, with a size limit.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace brrr {

// Throws brrr::Error naming `path` (and `what`, e.g. "--json") when it cannot be created: its
// folder is missing or not writable, or it is a folder. Run before any long work.
void check_output_path(const std::string& path, const std::string& what);
// Throws brrr::Error "cannot write 'PATH': REASON". Existing non-regular targets (/dev/stdout, a
// FIFO) are written in place; a symlink is followed and its target replaced.
void write_file(const std::string& path, std::string_view data);
// The same, reporting failure in *why instead of throwing (for best-effort cache writes).
bool try_write_file(const std::string& path, std::string_view data, std::string* why = nullptr);
// Temp file + rename onto the name `path` itself, whatever is there (a symlink or FIFO is
// replaced, not followed): for cache entries.
bool try_replace_file(const std::string& path, std::string_view data, std::string* why = nullptr);
// True with the whole file in *out when `path` is a regular file (a final symlink is not
// followed, a FIFO or device never opened) of at most max_bytes.
bool read_regular_file(const std::string& path, size_t max_bytes, std::string* out);

}  // namespace brrr
