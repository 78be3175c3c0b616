// Megatron-LM's indexed datasets (megatron/core/datasets/indexed_dataset.py,
// the "MMIDIDX" format that tools/preprocess_data.py writes), read-only.
//
//   PREFIX.idx  "MMIDIDX\0\0" (9 bytes), version uint64 = 1,
//               dtype code uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//               6 float64, 7 float32, 8 uint16), sequence count S uint64,
//               document count D uint64, then int32 sequence_lengths[S],
//               int64 sequence_pointers[S] (byte offsets into .bin),
//               int64 document_indices[D] (and, for multimodal data, int8
//               sequence_modes[S], ignored here)
//   PREFIX.bin  the sequences' tokens, back to back
//
// The dataset is read as one token stream: the sequences in order, without
// separators (preprocess_data.py --append-eod puts the end-of-document token
// in the sequences themselves). The sequences must lie back to back in .bin,
// as Megatron's builder writes them.
#pragma once

#include <cstdint>
#include <string>

#include "meshtrain/data/mapped_file.h"
#include "meshtrain/data/token_array.h"

namespace meshtrain::data {

class IndexedDataset {
 public:
  // Opens PREFIX.idx and PREFIX.bin. Throws Error naming the file and the
  // problem (missing, bad header, unsupported version or dtype, sizes that
  // disagree, sequences not back to back) before mapping the tokens.
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  int64_t num_sequences() const { return num_sequences_; }
  // Documents: the index's document_indices (their first sequences, then the
  // end) has one entry more.
  int64_t num_documents() const { return num_documents_; }
  // All tokens of all sequences, in order.
  const TokenArray& array() const { return tokens_; }

 private:
  std::string prefix_;
  MappedFile bin_;
  TokenArray tokens_;
  int64_t num_sequences_ = 0, num_documents_ = 0;
};

// True when PREFIX.idx exists.
bool is_indexed_dataset(const std::string& prefix);

}  // namespace meshtrain::data
