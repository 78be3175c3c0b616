// Whole-file writes that never leave a partial file behind.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace meshtrain::data {

// Writes the concatenation of `parts` to `path`: first to a temporary file
// beside it (flushed to disk), then renamed over `path`. `path` thus holds
// either its previous contents or all of the new ones. On failure the
// temporary is removed and Error "cannot write <what> <path>: <reason>" is
// thrown.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts,
                           std::string_view what);

}  // namespace meshtrain::data
