#include "frontend/onnx_tensor.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>

#include "core/env.hpp"

namespace brrr {
namespace fs = std::filesystem;

namespace {

// Resolves an external-data location strictly inside model_dir: relative, no "..", and the
// canonical path (symlinks followed) must stay under the canonical model folder.
fs::path resolve_external(const std::string& location, const fs::path& model_dir,
                          const std::string& what) {
  if (model_dir.empty()) fail("{}: external data is not allowed here", what);
  if (location.empty()) fail("{}: external data has no location", what);
  if (location.find('\0') != std::string::npos) fail("{}: external data location contains NUL", what);
  fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    fail("{}: external data location '{}' is absolute; it must be relative to the model's folder",
         what, location);
  for (const auto& part : loc)
    if (part == "..")
      fail("{}: external data location '{}' leaves the model's folder", what, location);
  std::error_code ec;
  fs::path base = fs::canonical(model_dir, ec);
  if (ec) fail("{}: cannot resolve the model's folder: {}", what, ec.message());
  fs::path full = fs::weakly_canonical(base / loc, ec);
  if (ec) fail("{}: cannot resolve external data '{}': {}", what, location, ec.message());
  auto rel = full.lexically_relative(base);
  if (rel.empty() || *rel.begin() == "..")
    fail("{}: external data location '{}' resolves outside the model's folder (symlink?)", what,
         location);
  if (!fs::is_regular_file(full, ec))
    fail("{}: external data file '{}' does not exist or is not a regular file", what, location);
  return full;
}

// An external-data file mapped once (copy-on-write, so a pass that writes a weight in place
// writes its own page) and shared by the tensors that live in it: a 2.5 GB decoder's weights
// were read into fresh memory, about 1 GB/s on this machine's page cache (the copy, and the
// zeroing and charging of every new page).
struct MappedFile {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (base != MAP_FAILED) munmap(base, size);
  }
};

// The mapping of `file` (one per file while any tensor in it lives), or null where mapping fails
// (the caller reads instead).
std::shared_ptr<MappedFile> map_file(const fs::path& file) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<MappedFile>> maps;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = file.string();
  if (auto live = maps[key].lock()) return live;
  const int fd = ::open(key.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  auto m = std::make_shared<MappedFile>();
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    m->size = size_t(st.st_size);
    // No MAP_POPULATE: on a private writable mapping it prefaults for writing, copying every
    // page (measured: most of the load time again). Pages map on first read, shared with the
    // page cache.
    m->base = ::mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (m->base == MAP_FAILED) return nullptr;
  maps[key] = m;
  return m;
}

template <typename Src, typename Dst>
void copy_typed(const google::protobuf::RepeatedField<Src>& src, Tensor& t,
                const std::string& what, const char* field) {
  if (int64_t(src.size()) != t.numel())
    fail("{}: {} has {} values but dims {} need {}", what, field, src.size(),
         shape_str(t.shape()), t.numel());
  Dst* d = t.data<Dst>();
  for (int i = 0; i < src.size(); ++i) {
    if constexpr (std::is_same_v<Dst, bool>) d[i] = src[i] != 0;
    else d[i] = Dst(src[i]);
  }
}

// f16/bf16 in int32_data hold the raw 16 bits.
template <typename H>
void copy_half_bits(const google::protobuf::RepeatedField<int32_t>& src, Tensor& t,
                    const std::string& what) {
  if (int64_t(src.size()) != t.numel())
    fail("{}: int32_data has {} values but dims {} need {}", what, src.size(),
         shape_str(t.shape()), t.numel());
  H* d = t.data<H>();
  for (int i = 0; i < src.size(); ++i) d[i].bits = uint16_t(src[i]);
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const fs::path& model_dir,
                         const std::string& what) {
  if (p.data_type() == onnx::TensorProto::STRING)
    fail("{}: string tensors are unsupported", what);
  DType dt;
  try {
    dt = dtype_from_onnx(p.data_type());
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) BRRR_CHECK(d >= 0, "{}: negative dim {} in {}", what, d, shape_str(shape));
  size_t want = 0;
  try {
    want = Tensor::checked_nbytes(dt, shape);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset" || kv.key() == "length") {
        int64_t v = 0;
        try {
          size_t used = 0;
          v = std::stoll(kv.value(), &used);
          if (used != kv.value().size() || v < 0) throw std::invalid_argument("bad");
        } catch (const std::exception&) {
          fail("{}: external data {} '{}' is not a non-negative integer", what, kv.key(), kv.value());
        }
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    fs::path file = resolve_external(location, model_dir, what);
    if (length >= 0 && size_t(length) != want)
      fail("{}: external data length {} but dims {} of {} need {} bytes", what, length,
           shape_str(shape), dtype_name(dt), want);
    std::error_code ec;
    uintmax_t fsize = fs::file_size(file, ec);
    if (ec || uintmax_t(offset) > fsize || fsize - uintmax_t(offset) < want)
      fail("{}: external data file '{}' is too short for offset {} + {} bytes", what, location,
           offset, want);
    // In place in the file's mapping where the data is 64-byte aligned there (as an allocated
    // tensor is; BRRR_MAP_EXTERNAL=0 reads every tensor instead).
    if (want > 0 && env::integer("BRRR_MAP_EXTERNAL") != 0)
      if (std::shared_ptr<MappedFile> m = map_file(file);
          m && size_t(offset) <= m->size && m->size - size_t(offset) >= want) {
        char* data = static_cast<char*>(m->base) + offset;
        if (reinterpret_cast<uintptr_t>(data) % 64 == 0)
          return Tensor::from_shared(std::move(m), data, dt, shape);
      }
    Tensor t = Tensor::empty(dt, shape);
    std::ifstream in(file, std::ios::binary);
    in.seekg(offset);
    in.read(static_cast<char*>(t.raw()), std::streamsize(want));
    if (!in) fail("{}: cannot read external data file '{}'", what, location);
    return t;
  }
  Tensor t;
  try {
    t = Tensor::empty(dt, shape);
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    if (raw.size() != want)
      fail("{}: raw_data has {} bytes but dims {} of {} need {}", what, raw.size(),
           shape_str(shape), dtype_name(dt), want);
    if (want) std::memcpy(t.raw(), raw.data(), want);
    return t;
  }
  switch (dt) {
    case DType::f32: copy_typed<float, float>(p.float_data(), t, what, "float_data"); break;
    case DType::f64: copy_typed<double, double>(p.double_data(), t, what, "double_data"); break;
    case DType::i64: copy_typed<int64_t, int64_t>(p.int64_data(), t, what, "int64_data"); break;
    case DType::i32: copy_typed<int32_t, int32_t>(p.int32_data(), t, what, "int32_data"); break;
    case DType::i8: copy_typed<int32_t, int8_t>(p.int32_data(), t, what, "int32_data"); break;
    case DType::u8: copy_typed<int32_t, uint8_t>(p.int32_data(), t, what, "int32_data"); break;
    case DType::boolean: copy_typed<int32_t, bool>(p.int32_data(), t, what, "int32_data"); break;
    case DType::f16: copy_half_bits<f16>(p.int32_data(), t, what); break;
    case DType::bf16: copy_half_bits<bf16>(p.int32_data(), t, what); break;
  }
  return t;
}

}  // namespace brrr
