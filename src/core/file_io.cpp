#include "core/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "brrr/error.hpp"
#include "core/cleanup.hpp"

namespace brrr {

namespace {

std::atomic<unsigned> g_counter{0};

std::string dir_of(const std::string& path) {
  size_t s = path.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : path.substr(0, s);
}

bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += size_t(n);
  }
  return true;
}

bool fail_with(std::string* why, const std::string& path, int err) {
  if (why) *why = fmt::format("cannot write '{}': {}", path, std::strerror(err));
  return false;
}

}  // namespace

void check_output_path(const std::string& path, const std::string& what) {
  BRRR_CHECK(!path.empty(), "{}: the output path is empty", what);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    BRRR_CHECK(!S_ISDIR(st.st_mode), "{} '{}': is a directory", what, path);
    if (!S_ISREG(st.st_mode)) return;  // /dev/stdout, a FIFO: written in place
  }
  std::string dir = dir_of(path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("{} '{}': the folder '{}' does not exist", what, path, dir);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail("{} '{}': cannot write into '{}': {}", what, path, dir, std::strerror(errno));
}

bool try_write_file(const std::string& path, std::string_view data, std::string* why) {
  std::string target = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char real[PATH_MAX];
    if (::realpath(path.c_str(), real)) target = real;  // replace the target, keep the link
  }
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or FIFO: no temp file beside it (that would replace the node), write in place.
    BRRR_CHECK(!S_ISDIR(st.st_mode), "cannot write '{}': is a directory", path);
    int fd = ::open(target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return fail_with(why, path, errno);
    bool ok = write_all(fd, data);
    int err = errno;
    if (::close(fd) != 0 && ok) ok = false, err = errno;
    return ok ? true : fail_with(why, path, err);
  }
  return try_replace_file(target, data, why);
}

bool try_replace_file(const std::string& path, std::string_view data, std::string* why) {
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), g_counter++);
  TempFileGuard guard(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail_with(why, path, errno);
  bool ok = write_all(fd, data) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    return fail_with(why, path, err);
  }
  return true;
}

void write_file(const std::string& path, std::string_view data) {
  std::string why;
  if (!try_write_file(path, data, &why)) throw Error(why);
}

bool read_regular_file(const std::string& path, size_t max_bytes, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) <= max_bytes;
  if (ok) {
    out->resize(size_t(st.st_size));
    size_t done = 0;
    while (ok && done < out->size()) {
      ssize_t n = ::read(fd, out->data() + done, out->size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += size_t(n);
    }
    char extra;
    ok = ok && ::read(fd, &extra, 1) == 0;  // it grew while we read: not the file we measured
  }
  ::close(fd);
  if (!ok) out->clear();
  return ok;
}

}  // namespace brrr
