// `meshtrain --version` names the source revision and the compiled backends.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "meshtrain/core/backends.h"

namespace {

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

TEST(Version, NamesTheCompiledBackends) {
  const std::string out = capture(std::string(MESHTRAIN_BINARY) + " --version");
  EXPECT_NE(out.find("meshtrain "), std::string::npos) << out;
  EXPECT_NE(out.find("backends: cpu (oneDNN)"), std::string::npos) << out;
  EXPECT_EQ(out.find("cuda (CUDA") != std::string::npos, meshtrain::cuda_compiled()) << out;
}

}  // namespace
