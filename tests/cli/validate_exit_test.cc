// `meshtrain validate` fails (non-zero exit, the reason on stderr) when no
// row could be compared or any row is malformed, and succeeds otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

const char* kHeader =
    "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
    "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind\n";
const char* kRow = "ok,s,frontier,48,6144,48,2048,50688,16,1,8,0,640,1,full,no,yes,73.5,hardware\n";

struct Outcome {
  int exit_code = 0;
  std::string err;
};

Outcome validate(const std::string& csv, const std::string& flags = "") {
  const std::string stem = (fs::temp_directory_path() / ("mt-validate-" + std::to_string(getpid()))).string();
  std::ofstream(stem + ".csv") << csv;
  const std::string cmd = std::string(MESHTRAIN_BINARY) + " validate " + stem + ".csv " + flags + " >/dev/null 2>" +
                          stem + ".err";
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::stringstream ss;
  ss << std::ifstream(stem + ".err").rdbuf();
  o.err = ss.str();
  fs::remove(stem + ".csv");
  fs::remove(stem + ".err");
  return o;
}

TEST(ValidateCli, SucceedsWhenEveryRowIsCompared) {
  const Outcome o = validate(std::string(kHeader) + kRow);
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

TEST(ValidateCli, FailsAndListsMalformedRows) {
  const Outcome o = validate(std::string(kHeader) + kRow +
                             "zero-tp,s,frontier,48,6144,48,2048,50688,16,0,8,0,640,1,full,no,yes,73.5,hardware\n");
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("zero-tp"), std::string::npos) << o.err;
}

TEST(ValidateCli, FailsWhenNothingCouldBeCompared) {
  const Outcome header_only = validate(kHeader);
  EXPECT_NE(header_only.exit_code, 0);
  EXPECT_NE(header_only.err.find("no row could be compared"), std::string::npos) << header_only.err;
  const Outcome json = validate(kHeader, "--json");
  EXPECT_NE(json.exit_code, 0);
  // An empty file and binary garbage said "0 rows compared" and exited 0.
  const Outcome empty = validate("");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_FALSE(empty.err.empty());
  const char garbage[] = "\x7f" "ELF\x02\x01\x01\0\0\0\xff\xfe,\n\x01\x02";
  const Outcome binary = validate(std::string(garbage, sizeof(garbage) - 1));
  EXPECT_NE(binary.exit_code, 0);
  EXPECT_FALSE(binary.err.empty());
}

TEST(ValidateCli, AcceptsAByteOrderMark) {
  const Outcome o = validate(std::string("\xEF\xBB\xBF") + kHeader + kRow);
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

}  // namespace
