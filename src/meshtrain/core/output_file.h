// OutputFile: every file the program writes (reports, traces, weights, token
// files, CSV) goes through this one helper, written the way a user expects:
//   - a symbolic link is followed: its target is written, the link stays;
//   - anything that is not a regular file (a device such as /dev/null or
//     /dev/full, a FIFO, "-" for standard output) is written directly, in
//     place: never replaced by a regular file;
//   - a regular file (or a new one) is written atomically: a temporary file
//     beside the target, fsync, rename over the target, fsync of the folder;
//     readers see the old contents or all of the new, never a part. A
//     replaced file keeps its permission bits.
// OutputFile::open() checks the path before any work is done (the folder
// exists and takes a new file, an existing target is writable) so that a bad
// path fails in a second, not after a long run. Errors are Error
// "cannot write <what> <path>: <reason>".
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace meshtrain {

class OutputFile {
 public:
  enum class Kind { none, regular, direct, standard_output };

  OutputFile() = default;  // no output (kind none): write() does nothing
  // Resolves `path` (following symbolic links) and checks that it can be
  // written; `what` names the output in messages ("run report").
  static OutputFile open(const std::string& path, std::string_view what);

  // Writes the concatenation of `parts` as the file's whole contents.
  void write(std::initializer_list<std::string_view> parts) const;

  Kind kind() const { return kind_; }
  const std::string& path() const { return path_; }      // as given
  const std::string& target() const { return target_; }  // after following links

 private:
  void write_direct(std::initializer_list<std::string_view> parts) const;
  void write_atomically(std::initializer_list<std::string_view> parts) const;
  [[noreturn]] void fail(int err) const;

  Kind kind_ = Kind::none;
  std::string path_, target_, what_;
};

// OutputFile::open(path, what).write(parts): for outputs made at once.
void write_output_file(const std::string& path, std::initializer_list<std::string_view> parts,
                       std::string_view what);

}  // namespace meshtrain
