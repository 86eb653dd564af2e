// `brrr run` on bad input: every user or model error exits 2 with one line on stderr; --check
// exits 0 on a match and 1 on a mismatch. Runs the built binary (BRRR_CLI).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "../cli/cli_util.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(BRRR_TEST_DATA) + "/cli";

using brrr::cli_test::CliResult;
using brrr::cli_test::run_cli;
using brrr::cli_test::slurp;
brrr::cli_test::ScratchCleanup scratch_cleanup;

fs::path write_file(const std::string& name, const std::string& bytes) {
  fs::path p = brrr::cli_test::scratch() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// Exit 2 and exactly one line on stderr, starting "brrr: error:" and containing `msg`.
void expect_user_error(const CliResult& r, const std::string& msg) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("brrr: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(msg), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliErrors, MissingModelFile) {
  expect_user_error(run_cli("run " + kData + "/no_such_model.onnx"), "does not exist");
}

TEST(CliErrors, DirectoryAsModel) {
  expect_user_error(run_cli("run " + kData), "is a folder");
}

TEST(CliErrors, EmptyFile) {
  expect_user_error(run_cli("run " + write_file("empty.onnx", "").string()), "empty");
}

TEST(CliErrors, TruncatedModel) {
  std::string bytes = slurp(kData + "/add_relu.onnx");
  ASSERT_GT(bytes.size(), 40u);
  for (size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 7}) {
    auto p = write_file("truncated.onnx", bytes.substr(0, cut));
    expect_user_error(run_cli("run " + p.string()), "");
  }
}

TEST(CliErrors, RandomBytes) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 5; ++trial) {
    std::string bytes(200 + trial * 97, '\0');
    for (char& c : bytes) c = char(rng());
    auto p = write_file("random.onnx", bytes);
    expect_user_error(run_cli("run " + p.string()), "");
  }
}

TEST(CliErrors, UnsupportedOp) {
  expect_user_error(run_cli("run " + kData + "/unsupported_op.onnx"),
                    "unsupported op 'com.example.FancyOp'");
}

TEST(CliErrors, BadShapeArguments) {
  std::string m = kData + "/add_relu.onnx";
  expect_user_error(run_cli("run " + m + " --shape x:2xq"), "not a non-negative dimension");
  expect_user_error(run_cli("run " + m + " --shape x2x3"), "should look like NAME:");
  expect_user_error(run_cli("run " + m + " --shape x:3x3"), "fixed to 2");
  expect_user_error(run_cli("run " + m + " --shape x:2x3x1"), "rank 2");
  expect_user_error(run_cli("run " + m + " --shape nope:1"), "not an input of the model");
  expect_user_error(run_cli("run " + m + " --shape x:99999999999x99999999999"), "");
}

TEST(CliErrors, DataWithWrongShape) {
  expect_user_error(
      run_cli("run " + kData + "/add_relu.onnx --data " + kData + "/data_wrong_shape"),
      "--data gives input 'x' shape [3, 2] but the model declares [2, 3]");
}

TEST(CliErrors, DataFolderProblems) {
  std::string m = kData + "/add_relu.onnx";
  expect_user_error(run_cli("run " + m + " --data " + kData + "/no_such_dir"), "does not exist");
  fs::path empty = brrr::cli_test::scratch() / "empty_data";
  fs::create_directories(empty);
  expect_user_error(run_cli("run " + m + " --data " + empty.string()), "no input_N.pb");
  expect_user_error(run_cli("run " + m + " --data " + kData + "/add_relu.onnx"), "not a folder");
  expect_user_error(run_cli("run " + m + " --check"), "--check needs --data");
  expect_user_error(run_cli("run " + m + " --data " + kData + "/data_no_outputs --check"),
                    "no output_N.pb");
  // A gap in the numbering: input_1.pb without input_0.pb.
  fs::path gap = brrr::cli_test::scratch() / "gap_data";
  fs::create_directories(gap);
  fs::copy_file(kData + "/data_ok/input_0.pb", gap / "input_1.pb",
                fs::copy_options::overwrite_existing);
  expect_user_error(run_cli("run " + m + " --data " + gap.string()), "no input_0.pb");
  // A corrupt tensor file.
  fs::path bad = brrr::cli_test::scratch() / "bad_tensor";
  fs::create_directories(bad);
  std::ofstream(bad / "input_0.pb", std::ios::binary) << std::string("\xff\xff\xff\x01garbage");
  expect_user_error(run_cli("run " + m + " --data " + bad.string()), "");
}

TEST(CliRun, CheckPassesAndFails) {
  std::string m = kData + "/add_relu.onnx";
  for (const char* backend : {"cpu", "reference"}) {
    CliResult r =
        run_cli("run " + m + " --data " + kData + "/data_ok --check --backend " + backend);
    EXPECT_EQ(r.code, 0) << backend << ": " << r.out << r.err;
  }
  CliResult ok = run_cli("run " + m + " --data " + kData + "/data_ok --check");
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("check 0 'y': PASS"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("criterion:"), std::string::npos) << ok.out;
  CliResult bad = run_cli("run " + m + " --data " + kData + "/data_bad_expected --check");
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("FAIL"), std::string::npos) << bad.out;
}

TEST(CliRun, SymbolicDimDefaultsToOneWithNote) {
  CliResult r = run_cli("run " + kData + "/symbolic_batch.onnx");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: input 'x' has symbolic dims [batch, 3]; using --shape x:1x3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("float32 [1, 3]"), std::string::npos) << r.out;
  CliResult s = run_cli("run " + kData + "/symbolic_batch.onnx --shape x:5x3");
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(s.err.empty()) << s.err;
  EXPECT_NE(s.out.find("float32 [5, 3]"), std::string::npos) << s.out;
}

}  // namespace
