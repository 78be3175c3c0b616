// Writing a whole file so that readers never see a partial one.
#pragma once

#include <string>
#include <string_view>

namespace meshtrain {

// Writes `content` to `path` through a temporary file in the same directory
// ("<path>.tmp.<pid>") renamed into place. Throws Error on failure, leaving
// no temporary file behind.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace meshtrain
