// `meshtrain prepare-data` streams: preparing a corpus larger than a memory
// budget stays under the budget (the child's peak resident set, from wait4),
// and a corpus four times larger needs no more memory.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../data/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using meshtrain::data::testing::TempDir;

// A .txt of `mib` MiB: distinct paragraphs of about 2 KiB.
void write_corpus(const std::string& path, int mib) {
  std::ofstream out(path, std::ios::binary);
  std::string para;
  for (int64_t i = 0; out.tellp() < int64_t(mib) << 20; ++i) {
    para = "Paragraph " + std::to_string(i) + ".";
    while (para.size() < 2000) para += " The quick brown fox " + std::to_string(i * 7919 % 100003) + " jumps.";
    out << para << "\n\n";
  }
}

// Runs prepare-data on `input`; the child's exit status and peak RSS in MiB.
std::pair<int, double> prepare(const std::string& input, const std::string& out) {
  const std::vector<std::string> args = {MESHTRAIN_BINARY, "prepare-data", "--input", input, "--out", out,
                                         "--tokenizer", "bytes", "--threads", "2"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::freopen("/dev/null", "w", stdout);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, double(ru.ru_maxrss) / 1024.0};
}

TEST(PrepareData, MemoryStaysBoundedWhateverTheCorpusSize) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer the peak RSS counts its quarantine of freed memory and its shadow";
#endif
  TempDir dir;
  constexpr double kBudgetMiB = 64;
  write_corpus((dir.path() / "small.txt").string(), 32);
  write_corpus((dir.path() / "large.txt").string(), 128);  // larger than the budget
  const auto [small_rc, small_peak] = prepare((dir.path() / "small.txt").string(), (dir.path() / "a").string());
  const auto [large_rc, large_peak] = prepare((dir.path() / "large.txt").string(), (dir.path() / "b").string());
  ASSERT_EQ(small_rc, 0);
  ASSERT_EQ(large_rc, 0);
  // The tokens were written: 128 MiB of bytes, one token each, uint16.
  EXPECT_GT(fs::file_size(dir.path() / "b" / "train.bin"), uint64_t(2 * 120) << 20);
  RecordProperty("peak_rss_mib_32mib_corpus", std::to_string(small_peak));
  RecordProperty("peak_rss_mib_128mib_corpus", std::to_string(large_peak));
  std::printf("peak RSS: %.1f MiB for a 32 MiB corpus, %.1f MiB for a 128 MiB corpus\n", small_peak, large_peak);
  EXPECT_LT(large_peak, kBudgetMiB) << "preparing a 128 MiB corpus held more than the budget";
  EXPECT_LT(large_peak, small_peak + 8) << "memory grows with the corpus";
}

}  // namespace
