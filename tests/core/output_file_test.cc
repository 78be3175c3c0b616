// OutputFile: symbolic links written through, devices and FIFOs written in
// place (never replaced by a regular file), regular files replaced
// atomically keeping their mode, bad paths found by open().
#include "meshtrain/core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

mode_t lmode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode;
}

TEST(OutputFile, RegularFileReplacedWholeKeepingItsModeAndNoTemporary) {
  TempDir d;
  const fs::path p = d.path() / "f.txt";
  write_output_file(p.string(), {"first version, ", "longer"}, "test output");
  EXPECT_EQ(read(p), "first version, longer");
  ::chmod(p.c_str(), 0640);
  write_output_file(p.string(), {"second"}, "test output");
  EXPECT_EQ(read(p), "second");
  EXPECT_EQ(lmode(p) & 0777, 0640u);
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()), 1);
}

TEST(OutputFile, SymbolicLinkIsWrittenThroughToItsTarget) {
  TempDir d;
  const fs::path target = d.path() / "target.json", link = d.path() / "link.json";
  write_output_file(target.string(), {"old"}, "test output");
  fs::create_symlink("target.json", link);  // relative, as users make them
  const OutputFile f = OutputFile::open(link.string(), "run report");
  EXPECT_EQ(f.kind(), OutputFile::Kind::regular);
  EXPECT_EQ(fs::path(f.target()), target);
  f.write({"new"});
  EXPECT_TRUE(S_ISLNK(lmode(link))) << "the link was replaced";
  EXPECT_EQ(read(target), "new");
  // A dangling link creates its target.
  const fs::path dangling = d.path() / "dangling", made = d.path() / "made-by-link";
  fs::create_symlink(made, dangling);
  write_output_file(dangling.string(), {"x"}, "test output");
  EXPECT_TRUE(S_ISLNK(lmode(dangling)));
  EXPECT_EQ(read(made), "x");
}

TEST(OutputFile, DevicesAreWrittenInPlaceNotReplaced) {
  const OutputFile null = OutputFile::open("/dev/null", "run report");
  EXPECT_EQ(null.kind(), OutputFile::Kind::direct);
  null.write({"discarded"});
  EXPECT_TRUE(S_ISCHR(lmode("/dev/null"))) << "/dev/null is no longer a device";
  // /dev/full takes nothing: the write fails with the device's reason, and it stays a device.
  try {
    write_output_file("/dev/full", {"x"}, "plan table");
    FAIL() << "writing /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write plan table /dev/full: No space left on device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(S_ISCHR(lmode("/dev/full")));
}

TEST(OutputFile, FifoIsWrittenInPlace) {
  TempDir d;
  const fs::path fifo = d.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  write_output_file(fifo.string(), {"through ", "the pipe"}, "trace");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(S_ISFIFO(lmode(fifo)));
}

TEST(OutputFile, DashIsStandardOutput) {
  EXPECT_EQ(OutputFile::open("-", "plan table").kind(), OutputFile::Kind::standard_output);
  EXPECT_EQ(OutputFile::open("", "plan table").kind(), OutputFile::Kind::none);
}

TEST(OutputFile, OpenFindsBadPathsBeforeAnyWork) {
  TempDir d;
  EXPECT_THROW(OutputFile::open((d.path() / "missing" / "r.json").string(), "run report"), Error);
  EXPECT_THROW(OutputFile::open(d.path().string(), "run report"), Error);  // a folder
  const fs::path loop = d.path() / "loop";
  fs::create_symlink(loop, loop);
  EXPECT_THROW(OutputFile::open(loop.string(), "run report"), Error);
  try {
    OutputFile::open((d.path() / "missing" / "r.json").string(), "run report");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write run report"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
  // The probe leaves nothing behind.
  OutputFile::open((d.path() / "r.json").string(), "run report");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()), 1);  // the loop link
}

}  // namespace
}  // namespace meshtrain
