// The plan file's format: "BRRRPLAN", a format version (u32), then records, then the checksum.
// Every record is a u64 length and its bytes: the key's fields as name and value pairs (a count
// first), then the modules and the weight packs as name and bytes pairs (a count first each). The
// last 32 bytes are fast_hash of everything before them, so a truncated or edited file fails
// its checksum before any of it is used; lengths are still checked against the bytes left.
#include "cli/plan_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "brrr/error.hpp"
#include "core/file_io.hpp"
#include "core/kernel_cache.hpp"

namespace brrr::cli {

extern const char* const kBuildCommit;

namespace {

constexpr char kMagic[8] = {'B', 'R', 'R', 'R', 'P', 'L', 'A', 'N'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHashChars = 32;

std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 1);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1);
  }
  // The flags are long: their hash stands for them (the model name says which CPU it was).
  return fmt::format("{} (flags {})", model.empty() ? " unknown" : model, content_hash(flags));
}

void put_u64(std::string& out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}
void put(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s.data(), s.size());
}

// Reads records from the checked payload; every read is bounds-checked.
struct Reader {
  std::string_view data;
  const std::string& path;
  uint64_t u64() {
    if (data.size() < 8) fail("--load-plan '{}': the file is truncated", path);
    uint64_t v;
    std::memcpy(&v, data.data(), 8);
    data.remove_prefix(8);
    return v;
  }
  std::string_view bytes() {
    uint64_t n = u64();
    if (n > data.size()) fail("--load-plan '{}': a record runs past the end of the file", path);
    std::string_view s = data.substr(0, size_t(n));
    data.remove_prefix(size_t(n));
    return s;
  }
  uint64_t count() {
    uint64_t n = u64();
    // Every entry takes at least 16 bytes (two lengths): a larger count is damage.
    if (n > data.size() / 16) fail("--load-plan '{}': an entry count is out of range", path);
    return n;
  }
};

// The file's checksum and the model's fingerprint: 128 bits from four xxHash-style lanes over
// 8-byte words (content_hash's byte-at-a-time FNV took ~40 ms for squeezenet's 12 MB plan and
// 5 MB model; this is ~20x faster), fed in blocks so a model is hashed as it is read. An
// integrity check, not a security one.
struct FastHash {
  static constexpr uint64_t P1 = 0x9e3779b185ebca87ull, P2 = 0xc2b2ae3d27d4eb4full;
  uint64_t lane[4] = {P1 + P2, P2, 0, 0 - P1};
  uint64_t total = 0;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t round(uint64_t acc, uint64_t w) { return rotl(acc + w * P2, 31) * P1; }
  static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P1;
    return h ^ (h >> 32);
  }
  // n a multiple of 32.
  void blocks(const char* d, size_t n) {
    for (size_t i = 0; i + 32 <= n; i += 32)
      for (int k = 0; k < 4; ++k) {
        uint64_t w;
        std::memcpy(&w, d + i + 8 * k, 8);
        lane[k] = round(lane[k], w);
      }
    total += n;
  }
  // The last bytes (fewer than 32).
  std::string finish(const char* d, size_t n) {
    uint64_t tail[4] = {0, 0, 0, 0};
    if (n) std::memcpy(tail, d, n);
    total += n;
    for (int k = 0; k < 4; ++k) lane[k] = round(lane[k], tail[k] ^ total);
    uint64_t a = mix(lane[0] ^ rotl(lane[1], 17) ^ rotl(lane[2], 37) ^ rotl(lane[3], 53));
    uint64_t b = mix(lane[3] ^ rotl(lane[2], 13) ^ rotl(lane[1], 29) ^ rotl(lane[0], 47) ^ a);
    return fmt::format("{:016x}{:016x}", a, b);
  }
};

std::string fast_hash(std::string_view d) {
  FastHash h;
  size_t whole = d.size() / 32 * 32;
  h.blocks(d.data(), whole);
  return h.finish(d.data() + whole, d.size() - whole);
}

// fast_hash of a model file, read in 1 MiB blocks: reading it whole into memory cost
// mobilenet_v3_small's 10 MB a fresh allocation's page faults and a copy, about 10 ms under load.
std::string model_hash(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO never blocks
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    fail("cannot read model file '{}'", path);
  }
  FastHash h;
  std::vector<char> buf(size_t(1) << 20);
  for (;;) {
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        ::close(fd);
        fail("cannot read model file '{}'", path);
      }
      if (r == 0) break;
      got += size_t(r);
    }
    if (got == buf.size()) {
      h.blocks(buf.data(), got);
      continue;
    }
    ::close(fd);
    size_t whole = got / 32 * 32;
    h.blocks(buf.data(), whole);
    return h.finish(buf.data() + whole, got - whole);
  }
}

// A value as the error line shows it: short values whole, long ones cut.
std::string shown(const std::string& v) {
  std::string s = v.size() > 80 ? v.substr(0, 77) + "..." : v;
  for (char& c : s)  // a crafted file's control bytes never break the one line
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s.empty() ? "(none)" : s;
}

}  // namespace

PlanKey plan_key(const std::string& model_path, const SessionOptions& opts) {
  std::string shapes;
  for (const auto& [name, s] : opts.input_shapes) {
    shapes += shapes.empty() ? "" : ",";
    shapes += name + ":";
    for (size_t i = 0; i < s.size(); ++i) shapes += (i ? "x" : "") + std::to_string(s[i]);
  }
  return {{"brrr", fmt::format("{} (commit {})", BRRR_VERSION, kBuildCommit)},
          {"model", model_hash(model_path)},
          {"backend", opts.backend},
          {"precision", opts.precision},
          {"fusion", std::to_string(opts.fusion)},
          {"threads", std::to_string(opts.threads)},
          {"shapes", shapes},
          {"cpu", cpu_identity()}};
}

void save_plan_file(const std::string& path, const PlanKey& key, const PlanBinaries& b) {
  std::string out(kMagic, sizeof kMagic);
  char v[4];
  std::memcpy(v, &kFormat, 4);
  out.append(v, 4);
  put_u64(out, key.size());
  for (const auto& [name, value] : key) {
    put(out, name);
    put(out, value);
  }
  for (const auto* m : {&b.modules, &b.weights}) {
    put_u64(out, m->size());
    for (const auto& [name, bytes] : *m) {
      put(out, name);
      put(out, bytes);
    }
  }
  out += fast_hash(out);
  write_file(path, out);
}

std::shared_ptr<PlanBinaries> load_plan_file(const std::string& path, const PlanKey& expected) {
  std::string file;
  if (!read_regular_file(path, kMaxPlanFileBytes, &file))
    fail("--load-plan '{}': not a readable regular file of at most {} GiB", path,
         kMaxPlanFileBytes >> 30);
  if (file.size() < sizeof kMagic + 4 + kHashChars ||
      std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    fail("--load-plan '{}': not a brrr plan file (save one with --save-plan)", path);
  uint32_t format;
  std::memcpy(&format, file.data() + sizeof kMagic, 4);
  if (format != kFormat)
    fail("--load-plan '{}': plan file format {}, this brrr reads format {}; save it again", path,
         format, kFormat);
  std::string_view body(file.data(), file.size() - kHashChars);
  if (fast_hash(body) != std::string_view(file).substr(body.size()))
    fail("--load-plan '{}': checksum mismatch (the file is truncated or was modified)", path);
  Reader r{body.substr(sizeof kMagic + 4), path};
  uint64_t fields = r.count();
  PlanKey saved;
  for (uint64_t i = 0; i < fields; ++i) {
    std::string name(r.bytes());
    saved.emplace_back(name, std::string(r.bytes()));
  }
  for (const auto& [name, value] : expected) {
    std::string was;
    bool found = false;
    for (const auto& [n, v] : saved)
      if (n == name) {
        was = v;
        found = true;
      }
    if (!found || was != value)
      fail("--load-plan '{}' was saved for {} {}, this run has {}; save it again with --save-plan",
           path, name, shown(found ? was : "(not recorded)"), shown(value));
  }
  auto b = std::make_shared<PlanBinaries>();
  for (auto* m : {&b->modules, &b->weights}) {
    uint64_t n = r.count();
    for (uint64_t i = 0; i < n; ++i) {
      std::string name(r.bytes());
      (*m)[name] = std::string(r.bytes());
    }
  }
  if (!r.data.empty()) fail("--load-plan '{}': unexpected bytes after its last record", path);
  return b;
}

}  // namespace brrr::cli
