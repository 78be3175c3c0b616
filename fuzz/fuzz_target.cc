// A libFuzzer target for one kind of input (FUZZ_KIND, set by
// fuzz/CMakeLists.txt): the reader may return or throw meshtrain::Error;
// anything else (another exception, a sanitizer report) is a finding.
// Built by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "accept.h"
#include "meshtrain/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    meshtrain::fuzz::accept(meshtrain::fuzz::InputKind::FUZZ_KIND,
                            std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const meshtrain::Error&) {
  }
  return 0;
}
