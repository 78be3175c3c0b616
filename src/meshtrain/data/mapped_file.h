// A file mapped read-only into memory: its bytes cost no heap, and pages are
// read from disk as they are touched. Move-only; unmapped on destruction.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meshtrain::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps all of `path`. Throws Error "cannot open <what> <path>: <reason>"
  // when it is missing, not a regular file or cannot be mapped. An empty
  // file maps to an empty view.
  MappedFile(const std::string& path, std::string_view what);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* data() const { return static_cast<const char*>(map_); }
  size_t size() const { return size_; }

 private:
  void unmap();

  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace meshtrain::data
