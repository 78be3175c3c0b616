// The text a corpus is prepared from, read as a stream of documents.
//
// Inputs are files and folders. A folder contributes its regular files (not
// its subfolders) whose names end in .txt or .jsonl or have no extension, in
// name order; other files (fortune's .dat and .u8 companions) are skipped.
// A file's kind follows its name:
//   NAME.jsonl  one JSON object per line; its "text" string is a document
//               (blank lines are skipped; anything else is an error naming
//               the file and line);
//   NAME.txt    documents separated by blank lines (as llm.c cuts Tiny
//               Shakespeare), each with its lines' newlines;
//   NAME        a fortune file: documents separated by lines holding only "%".
// Documents that are only whitespace are dropped. A document that grows past
// kMaxDocumentBytes is cut after the line that crosses it, so memory stays
// bounded by the longest line, whatever the size of the input.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::data {

inline constexpr size_t kMaxDocumentBytes = size_t{4} << 20;

enum class InputKind { fortune, text, jsonl };

struct InputFile {
  std::string path;
  InputKind kind;
};

// The files `inputs` name, as described above. Throws Error naming an input
// that does not exist, or when there is no file at all.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs);

// Calls `document` with each document of `files`, in order. When `raw` is
// set it is called with each file's name and then every byte of the file,
// in pieces (the input's fingerprint). Throws Error naming the file (and
// line) that cannot be read or parsed.
void read_documents(const std::vector<InputFile>& files, const std::function<void(std::string_view)>& document,
                    const std::function<void(std::string_view)>& raw = {});

// Cuts lines into documents for files of `kind` (fortune or text): feed each
// line with its newline, then finish().
class DocumentSplitter {
 public:
  DocumentSplitter(InputKind kind, std::function<void(std::string_view)> emit)
      : kind_(kind), emit_(std::move(emit)) {}
  void line(std::string_view line);
  void finish();

 private:
  InputKind kind_;
  std::function<void(std::string_view)> emit_;
  std::string doc_;
};

}  // namespace meshtrain::data
