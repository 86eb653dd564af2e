// The on-disk kernel cache both compilers share (CPU .so objects, CUDA cubins): key -> bytes.
// Each entry is an object file and a .hash file beside it holding hash(key, bytes), so truncated,
// corrupt or swapped entries miss. Publishing writes the object first and its hash second, each
// to a temp file renamed into place. Only regular files within a size limit are ever read: a
// symlink, FIFO or device in place of an entry is a miss, and the rebuilt entry replaces it.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace brrr {

// 128 bits from two FNV-1a streams: an integrity check for cache entries, not a security one.
std::string content_hash(std::string_view data);

class KernelCache {
 public:
  static constexpr size_t kMaxEntryBytes = size_t(1) << 30;

  // dir "" or BRRR_DISABLE_CACHE=1: every lookup misses and publish writes nothing.
  KernelCache(std::string dir, std::string suffix, size_t max_bytes = kMaxEntryBytes);

  // `requested` (else the user cache dir, $XDG_CACHE_HOME/brrr or ~/.cache/brrr) when it can be
  // written, else private_temp_dir().
  static std::string writable_dir(const std::string& requested);
  // $TMPDIR/brrr-cache-UID: created 0700, used only if it is a real folder owned by us (else a
  // fresh mkdtemp folder, removed at exit). One per user, so read-only caches leave no litter.
  static std::string private_temp_dir();

  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }
  std::string object_path(const std::string& key) const { return dir_ + "/" + key + suffix_; }
  std::string hash_path(const std::string& key) const { return object_path(key) + ".hash"; }
  // A fresh name in the cache folder for this process's work files, ending in `ext`.
  std::string temp_path(const std::string& key, const std::string& ext) const;

  // The object's bytes when the entry is valid.
  std::optional<std::string> lookup(const std::string& key) const;
  // Writes `bytes` as key's entry. False when the folder cannot take it (nothing is published).
  bool publish(const std::string& key, std::string_view bytes) const;
  // The same for an object already written at `tmp` (in the cache folder) holding `bytes`:
  // renamed into place, or removed on failure.
  bool publish_file(const std::string& key, const std::string& tmp, std::string_view bytes) const;

 private:
  std::string entry_hash(const std::string& key, std::string_view bytes) const;
  std::string dir_, suffix_;
  size_t max_bytes_;
  bool enabled_;
};

}  // namespace brrr
