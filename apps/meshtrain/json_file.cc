#include "json_file.h"

#include <fstream>

#include "meshtrain/core/error.h"

namespace meshtrain::cli {

nlohmann::json read_json_arg(const std::string& flag, const std::string& path) {
  std::ifstream f(path);
  check(bool(f), "{} {}: cannot open the file", flag, path);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} {}: invalid JSON ({})", flag, path, e.what()));
  }
}

}  // namespace meshtrain::cli
