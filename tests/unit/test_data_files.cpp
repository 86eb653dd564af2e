// Data files (test_data_set folders) that are too big or ambiguous: refused with a one-line
// error naming the file, before reading it; never a silent partial read or a protobuf FATAL.
#include <fcntl.h>

#include "hostile_util.hpp"
#include "onnx_builder.hpp"

namespace brrr::hostile {
namespace {

// An Identity model and a folder whose input_0.pb and output_0.pb hold the same 4 floats.
struct DataSet {
  std::string model, dir;
  explicit DataSet(const std::string& tag) {
    fs::path base = scratch() / ("data_" + tag);
    fs::create_directories(base / "data");
    onnx_builder::Model m;
    m.input("x", {4});
    m.node("Identity", {"x"}, {"y"});
    m.output("y");
    model = (base / "m.onnx").string();
    m.save(model);
    dir = (base / "data").string();
    onnx_builder::save_tensor(dir + "/input_0.pb", "x", {4}, {1, 2, 3, 4});
    onnx_builder::save_tensor(dir + "/output_0.pb", "y", {4}, {1, 2, 3, 4});
  }
};

// Grows `path` to `size` bytes with a hole (no disk blocks): a reader must refuse on size alone.
void grow_sparse(const std::string& path, off_t size) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, size), 0) << path;
  ::close(fd);
}

TEST(DataFiles, TensorFileOf4GiBPlusItsOwnSizeIsRefused) {
  // 4 GiB + n bytes truncated to int is n: the valid first n bytes were read and --check passed.
  DataSet d("4g");
  std::string in = d.dir + "/input_0.pb";
  off_t size = (off_t(1) << 32) + off_t(fs::file_size(in));
  grow_sparse(in, size);
  std::string err = error_of([&] { load_tensor_pb(in); });
  EXPECT_NE(err.find(in), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(size)), std::string::npos) << err;
  CliResult r = run_cli("run '" + d.model + "' --data '" + d.dir + "' --check");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("input_0.pb"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("FATAL"), std::string::npos) << r.err;
}

TEST(DataFiles, TensorFileJustOver2GiBIsRefusedWithoutProtobufFatal) {
  DataSet d("2g");
  std::string in = d.dir + "/input_0.pb";
  off_t size = (off_t(1) << 31) + (off_t(1) << 20);
  grow_sparse(in, size);
  CliResult r = run_cli("run '" + d.model + "' --data '" + d.dir + "' --check");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(in), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(size) + " bytes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("FATAL"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(DataFiles, ModelFileOver2GiBIsRefusedBeforeReading) {
  DataSet d("model2g");
  grow_sparse(d.model, (off_t(1) << 31) + 5);
  std::string err = error_of([&] { load_onnx(d.model); });
  EXPECT_NE(err.find(d.model), std::string::npos) << err;
  EXPECT_NE(err.find("2147483653 bytes"), std::string::npos) << err;
}

TEST(DataFiles, TwoFilesForOneInputNumberAreRefused) {
  DataSet d("dup");
  onnx_builder::save_tensor(d.dir + "/input_00.pb", "x", {4}, {5, 6, 7, 8});
  CliResult r = run_cli("run '" + d.model + "' --data '" + d.dir + "'");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("input_0.pb and input_00.pb"), std::string::npos) << r.err;
  onnx_builder::save_tensor(d.dir + "/output_000.pb", "y", {4}, {1, 2, 3, 4});
  fs::remove(d.dir + "/input_00.pb");
  r = run_cli("run '" + d.model + "' --data '" + d.dir + "' --check");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("output_0.pb and output_000.pb"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace brrr::hostile
