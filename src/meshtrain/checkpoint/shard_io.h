// The disk I/O of checkpoint shard files, at the disk's own bandwidth.
//
// Writing: write_shard_file() writes a file in kIoChunkBytes chunks that
// bypass the page cache (O_DIRECT where the file system takes it; buffered
// writes followed by one fsync ran at a fifth of the disk's bandwidth on a
// virtual disk), while the calling thread copies and checksums the next
// chunk; it returns the file's CRC-32 and the CRC-32 of each kCrcBlockBytes
// block, then fsyncs the file.
//
// Reading: read_ranges() reads only the requested byte ranges of a file,
// each widened to whole CRC blocks and merged with its neighbours, in
// windows of up to kReadWindowBytes, the next one read by a helper thread
// while the caller uses the last; every block read is checked against its recorded CRC-32
// before any byte of it is handed out. So each byte a loader uses is
// verified, and no rank reads bytes it does not need (besides the rest of
// the blocks its ranges start and end in).
//
// Buffers for O_DIRECT are 4096-byte aligned host memory tracked as
// MemCategory::checkpoint (IoBuffer).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/memory.h"

namespace meshtrain::checkpoint {

inline constexpr int64_t kCrcBlockBytes = int64_t{1} << 20;  // the granularity of the block checksums
inline constexpr int64_t kIoChunkBytes = int64_t{4} << 20;   // one write or read call
inline constexpr int64_t kReadWindowBytes = int64_t{16} << 20;  // one read when ranges are contiguous
inline constexpr int64_t kIoAlign = 4096;                    // O_DIRECT's alignment of memory, offsets, lengths

// Host memory aligned to kIoAlign, tracked as MemCategory::checkpoint.
class IoBuffer {
 public:
  IoBuffer() = default;
  explicit IoBuffer(int64_t bytes);  // not zeroed
  char* data() const { return aligned_; }
  int64_t capacity() const { return capacity_; }

 private:
  Buffer buf_;
  char* aligned_ = nullptr;
  int64_t capacity_ = 0;
};

int64_t round_up(int64_t n, int64_t to);

struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32 = 0;                 // of the whole file (zlib)
  std::vector<uint32_t> block_crc32;  // of each kCrcBlockBytes block, the last one possibly shorter
};

// Writes the concatenation of `parts` as the new file `path` and fsyncs it.
// When `parts` is one view starting kIoAlign-aligned whose memory extends to
// a multiple of kIoAlign bytes (a snapshot in an IoBuffer), chunks are
// written from it in place; otherwise each is copied into a staging buffer
// first. Throws Error "cannot write <path>: <reason>" (ENOSPC: "No space left
// on device"); the caller discards the file's folder.
FileDigest write_shard_file(const std::string& path, const std::vector<std::string_view>& parts);

// A byte range [begin, end) of a file.
struct ByteRange {
  int64_t begin = 0, end = 0;
};

// Reads `ranges` (sorted by begin, possibly overlapping) of the file `path`
// of `file_bytes` bytes whose blocks of `block_bytes` have the CRC-32s
// `block_crc32`, and calls use(i, offset, data, n) with consecutive pieces
// of range i (`offset` bytes into it; pieces split only at block
// boundaries), after checking the blocks they lie in; returns the bytes
// read. Throws Error naming the file and the block that fails its checksum,
// or the read error (and whatever `use` throws).
int64_t read_ranges(const std::string& path, int64_t file_bytes, int64_t block_bytes,
                 const std::vector<uint32_t>& block_crc32, const std::vector<ByteRange>& ranges,
                 const std::function<void(size_t, int64_t, const char*, int64_t)>& use);

// CRC-32 (zlib) of a byte string, continuing from `crc`.
uint32_t crc32_of(const char* data, int64_t n, uint32_t crc = 0);

}  // namespace meshtrain::checkpoint
