#include "core/kernel_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "brrr/error.hpp"
#include "core/cleanup.hpp"
#include "core/env.hpp"
#include "core/file_io.hpp"

namespace brrr {

namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> g_counter{0};

bool dir_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) return false;
  std::string probe = fmt::format("{}/.probe.{}.{}", dir, getpid(), g_counter++);
  int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

// A real folder (not a symlink) owned by us that no one else can write.
bool private_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return false;
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) return false;
  return true;
}

}  // namespace

std::string content_hash(std::string_view data) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : data) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ c) * 0x100000001b3ull;
    h2 ^= h2 >> 29;
  }
  return fmt::format("{:016x}{:016x}", h1, h2);
}

KernelCache::KernelCache(std::string dir, std::string suffix, size_t max_bytes)
    : dir_(std::move(dir)), suffix_(std::move(suffix)), max_bytes_(max_bytes) {
  enabled_ = !dir_.empty() && !env::flag("BRRR_DISABLE_CACHE");
}

std::string KernelCache::private_temp_dir() {
  static const std::string dir = [] {
    std::string d = fmt::format("{}/brrr-cache-{}", env::temp_dir(), ::geteuid());
    ::mkdir(d.c_str(), 0700);
    if (private_dir(d) && dir_writable(d)) return d;
    // Someone else's (or a symlink): a fresh one of our own, removed when brrr exits.
    std::string tmpl = env::temp_dir() + "/brrr-cache-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!::mkdtemp(buf.data()))
      fail("cannot create a private kernel cache folder in '{}' ($TMPDIR)", env::temp_dir());
    static std::string fresh;
    fresh = buf.data();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fresh, ec);
    });
    return fresh;
  }();
  return dir;
}

std::string KernelCache::writable_dir(const std::string& requested) {
  std::string dir = requested.empty() ? env::user_cache_dir() : requested;
  if (!dir.empty() && dir_writable(dir)) return dir;
  return private_temp_dir();  // read-only or unusable
}

std::string KernelCache::temp_path(const std::string& key, const std::string& ext) const {
  return fmt::format("{}/{}.{}.{}.tmp{}", dir_, key, ::getpid(), g_counter++, ext);
}

std::string KernelCache::entry_hash(const std::string& key, std::string_view bytes) const {
  // Binds the object to its key: another key's (valid) pair copied over this key's names fails.
  std::string s = key;
  s += '\0';
  s.append(bytes.data(), bytes.size());
  return content_hash(s);
}

std::optional<std::string> KernelCache::lookup(const std::string& key) const {
  if (!enabled_) return std::nullopt;
  std::string stored, bytes;
  if (!read_regular_file(hash_path(key), 256, &stored) || stored.empty()) return std::nullopt;
  if (!read_regular_file(object_path(key), max_bytes_, &bytes) || bytes.empty())
    return std::nullopt;
  if (stored != entry_hash(key, bytes)) return std::nullopt;
  return bytes;
}

bool KernelCache::publish(const std::string& key, std::string_view bytes) const {
  if (!enabled_) return false;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Object first, hash second: a reader that sees the new hash sees the new object.
  return try_replace_file(object_path(key), bytes) &&
         try_replace_file(hash_path(key), entry_hash(key, bytes));
}

bool KernelCache::publish_file(const std::string& key, const std::string& tmp,
                               std::string_view bytes) const {
  bool ok = enabled_ && ::rename(tmp.c_str(), object_path(key).c_str()) == 0;
  if (!ok) {
    ::unlink(tmp.c_str());
    return false;
  }
  return try_replace_file(hash_path(key), entry_hash(key, bytes));
}

}  // namespace brrr
