// Reading a JSON file given on the command line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace meshtrain::cli {

// The parsed file. Throws Error "<flag> <path>: <why>" if it cannot be read
// or is not JSON.
nlohmann::json read_json_arg(const std::string& flag, const std::string& path);

}  // namespace meshtrain::cli
