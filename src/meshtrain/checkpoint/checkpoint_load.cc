// verify_checkpoint and load_checkpoint (checkpoint.h).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshtrain/checkpoint/checkpoint.h"
#include "meshtrain/checkpoint/checkpoint_dir.h"
#include "meshtrain/checkpoint/metadata.h"
#include "meshtrain/checkpoint/safetensors.h"
#include "meshtrain/checkpoint/shard_io.h"
#include "meshtrain/comm/agreed_error.h"
#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/model/layout.h"

namespace meshtrain {

using namespace checkpoint;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_metadata(const std::string& path) {
  const fs::path f = fs::path(path) / "metadata.json";
  std::ifstream in(f);
  check(in.good(), "cannot read {}", f.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_metadata(ss.str(), f.string());
}

int64_t bytes_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

// The safetensors header of one shard file: where its data starts, and its
// entries.
struct ShardHeader {
  int64_t data_start = 0;
  std::map<std::string, StEntry> entries;
};

ShardHeader read_header(const fs::path& p, int64_t size) {
  std::ifstream in(p, std::ios::binary);
  check(in.good(), "cannot open shard file {}", p.string());
  std::string prefix(8, '\0');
  in.read(prefix.data(), 8);
  const int64_t n = st_header_length(prefix, size);
  std::string json(static_cast<size_t>(n), '\0');
  in.read(json.data(), n);
  check(in.gcount() == n, "cannot read the header of shard file {}", p.string());
  ShardHeader h;
  h.data_start = 8 + n;
  h.entries = st_parse_header(json, size - h.data_start);
  return h;
}

// Every file exists with its recorded size and block checksums; file i's
// header is parsed by rank i % world. (The data's checksums are checked
// block by block as the load reads it.)
void check_files(const std::string& path, const nlohmann::json& meta, int rank, int world) {
  int i = 0;
  for (const auto& [name, f] : meta["files"].items()) {
    const fs::path p = fs::path(path) / name;
    const int64_t n = bytes_of(p), want = f.at("bytes").get<int64_t>();
    check(n >= 0, "shard file {} is missing", p.string());
    check(n == want, "shard file {} has {} bytes, the metadata records {} (truncated?)", p.string(), n, want);
    const int64_t block = f.at("block_bytes").get<int64_t>();
    check(block > 0 && block % kIoAlign == 0, "shard file {}: block size {} is not a multiple of {}", name, block,
          kIoAlign);
    check(f.at("block_crc32").is_array() && int64_t(f["block_crc32"].size()) == (n + block - 1) / block,
          "shard file {}: the metadata records {} block checksums for {} bytes", name, f["block_crc32"].size(), n);
    if (i++ % world == rank) read_header(p, n);
  }
}

// One run of elements to move from a shard file into the training state.
struct Copy {
  int64_t begin = 0, end = 0;  // bytes of the file
  StDtype src = StDtype::f32;
  char* dst = nullptr;         // the first destination element
  int dst_bytes = 4;           // 4: float, 2: bf16
};

// Collects the copies that fill parts of this rank's state from the shard
// files, then reads each file once (only the blocks holding them).
class LoadPlan {
 public:
  LoadPlan(std::string path, const nlohmann::json& meta) : path_(std::move(path)), meta_(meta) {}

  // Elements [a, b) of this rank's slice of `s` (the checkpoint's tensor
  // `name`, entry `kind`) into dst[0, b - a).
  template <class D>
  void add(const std::string& name, const std::string& kind, const ParamSpec& s, int64_t a, int64_t b, D* dst) {
    int64_t filled = 0;
    for (const auto& sh : meta_["tensors"].at(name).at("shards"))
      filled += add_shard(sh, name + "/" + kind, s, a, b, reinterpret_cast<char*>(dst), int(sizeof(D)));
    check(filled == b - a, "tensor {}/{}: the checkpoint covers {} of this rank's {} elements", name, kind, filled,
          b - a);
  }

  // Reads and scatters everything added; returns the bytes read.
  int64_t run();

 private:
  int64_t add_shard(const nlohmann::json& sh, const std::string& key, const ParamSpec& s, int64_t a, int64_t b,
                    char* dst, int dst_bytes);
  void push(const std::string& file, const Copy& c);
  const ShardHeader& header(const std::string& file);

  std::string path_;
  const nlohmann::json& meta_;
  std::map<std::string, ShardHeader> headers_;
  std::map<std::string, std::vector<Copy>> copies_;  // by file
};

const ShardHeader& LoadPlan::header(const std::string& file) {
  if (auto it = headers_.find(file); it != headers_.end()) return it->second;
  const fs::path p = fs::path(path_) / file;
  return headers_.emplace(file, read_header(p, bytes_of(p))).first->second;
}

void LoadPlan::push(const std::string& file, const Copy& c) {
  std::vector<Copy>& v = copies_[file];
  if (!v.empty()) {
    Copy& l = v.back();
    const int64_t n = (l.end - l.begin) / st_dtype_bytes(l.src);
    if (l.end == c.begin && l.src == c.src && l.dst_bytes == c.dst_bytes && l.dst + n * l.dst_bytes == c.dst) {
      l.end = c.end;
      return;
    }
  }
  v.push_back(c);
}

// The saved shard `sh` holds elements [r0, r1) of its lr x lc slice at
// global (off0, off1); each global row both it and [a, b) of this rank's
// slice touch gives one run of columns. Returns the elements added.
int64_t LoadPlan::add_shard(const nlohmann::json& sh, const std::string& key, const ParamSpec& s, int64_t a,
                            int64_t b, char* dst, int dst_bytes) {
  const std::vector<int64_t> off = sh.at("global_offset"), shape = sh.at("local_shape"),
                             range = sh.at("flattened_range");
  const int64_t lc = shape.at(1), r0 = range.at(0), r1 = range.at(1), LC = s.local_cols;
  const int64_t x0 = std::max(off.at(1), s.col_offset), x1 = std::min(off[1] + lc, s.col_offset + LC);
  if (r1 <= r0 || a >= b || x0 >= x1) return 0;
  const int64_t g_lo = std::max(off[0] + r0 / lc, s.row_offset + a / LC),
                g_hi = std::min(off[0] + (r1 - 1) / lc, s.row_offset + (b - 1) / LC);
  if (g_lo > g_hi) return 0;
  const std::string file = sh.at("file");
  const ShardHeader& h = header(file);
  const auto it = h.entries.find(key);
  check(it != h.entries.end(), "shard file {} lacks tensor {}", file, key);
  const StEntry& e = it->second;
  const int esz = st_dtype_bytes(e.dtype);
  check((e.end - e.begin) / esz == r1 - r0, "tensor {} in {} has {} elements, its range {}", key, file,
        (e.end - e.begin) / esz, r1 - r0);
  const int64_t at = h.data_start + e.begin;
  check(at % esz == 0, "tensor {} in {} starts at byte {}, not a multiple of its element size", key, file, at);
  int64_t filled = 0;
  for (int64_t g = g_lo; g <= g_hi; ++g) {
    const int64_t sk = (g - off[0]) * lc, tk = (g - s.row_offset) * LC;
    const int64_t c0 = std::max({x0, off[1] + std::max<int64_t>(0, r0 - sk), s.col_offset + std::max<int64_t>(0, a - tk)});
    const int64_t c1 = std::min({x1, off[1] + std::min(lc, r1 - sk), s.col_offset + std::min(LC, b - tk)});
    if (c0 >= c1) continue;
    const int64_t src = sk + (c0 - off[1]) - r0, to = tk + (c0 - s.col_offset) - a;
    push(file, {at + src * esz, at + (src + c1 - c0) * esz, e.dtype, dst + to * dst_bytes, dst_bytes});
    filled += c1 - c0;
  }
  return filled;
}

// Converts n elements of dtype `src` to float or bf16 (dst_bytes 4 or 2).
void convert(const char* from, StDtype src, char* to, int dst_bytes, int64_t n) {
  if ((src == StDtype::f32) == (dst_bytes == 4)) {
    std::memcpy(to, from, static_cast<size_t>(n * dst_bytes));
  } else if (src == StDtype::f32) {
    const float* f = reinterpret_cast<const float*>(from);
    bf16* t = reinterpret_cast<bf16*>(to);
    for (int64_t i = 0; i < n; ++i) t[i] = from_f32<bf16>(f[i]);
  } else {
    const bf16* f = reinterpret_cast<const bf16*>(from);
    float* t = reinterpret_cast<float*>(to);
    for (int64_t i = 0; i < n; ++i) t[i] = to_f32(f[i]);
  }
}

int64_t LoadPlan::run() {
  int64_t bytes = 0;
  for (auto& [file, copies] : copies_) {
    std::stable_sort(copies.begin(), copies.end(), [](const Copy& x, const Copy& y) { return x.begin < y.begin; });
    std::vector<ByteRange> ranges;
    ranges.reserve(copies.size());
    for (const Copy& c : copies) ranges.push_back({c.begin, c.end});
    const nlohmann::json& f = meta_["files"].at(file);
    const std::vector<uint32_t> crcs = f.at("block_crc32");
    bytes += read_ranges((fs::path(path_) / file).string(), f.at("bytes"), f.at("block_bytes"), crcs, ranges,
                         [&, &plan = copies](size_t i, int64_t offset, const char* data, int64_t n) {
                           const Copy& c = plan[i];
                           const int esz = st_dtype_bytes(c.src);
                           convert(data, c.src, c.dst + offset / esz * c.dst_bytes, c.dst_bytes, n / esz);
                         });
  }
  return bytes;
}

// The checkpoint's name of parameter `s`: the serial model's tensor with the
// same initialisation stream (the tied copy "head.word" is "embedding.word").
std::map<uint64_t, std::string> names_by_stream(const ModelConfig& m) {
  std::map<uint64_t, std::string> out;
  const Layout serial = Layout::build(m, ParallelConfig{}, 0, 0);
  for (const Unit& u : serial.units())
    for (const ParamSpec& s : u.params) out.emplace(s.stream, s.name);
  return out;
}

}  // namespace

void verify_checkpoint(const std::string& dir, const ModelConfig& m, uint64_t seed, Communicator& world) {
  std::string mine;
  try {
    const std::string path = resolve_checkpoint(dir);
    const nlohmann::json meta = read_metadata(path);
    check_metadata_tensors(meta, m);
    const uint64_t saved = meta["rng"].value("seed", uint64_t{0});
    check(saved == seed, "it was trained with --seed {}, this run has --seed {} (the data order would differ)", saved,
          seed);
    check_files(path, meta, world.rank(), world.size());
  } catch (const std::exception& e) {
    mine = fmt::format("bad checkpoint {}: {}", dir, e.what());
  }
  throw_if_any(world, mine, /*after_io=*/true);
}

template <class T>
CheckpointMeta load_checkpoint(const std::string& dir, const ModelConfig& model, ShardedState<T>& state,
                               ProcessMesh& mesh) {
  std::string err;
  CheckpointMeta out;
  try {
    out.path = resolve_checkpoint(dir);
    const nlohmann::json meta = read_metadata(out.path);
    out.iteration = meta["iteration"];
    out.consumed_samples = meta["consumed_samples"];
    out.skipped_steps = meta["skipped_steps"];
    out.seed = meta["rng"].value("seed", uint64_t{0});
    const std::string value = meta["dtypes"].contains("master") ? "master" : "weight";
    LoadPlan plan(out.path, meta);
    std::map<const ParamSpec*, std::vector<typename ShardedState<T>::OptimizerShard>> shards;
    for (const auto& sh : state.optimizer_shards()) shards[sh.spec].push_back(sh);
    const std::map<uint64_t, std::string> names = names_by_stream(model);
    for (const Unit& u : state.layout().units()) {
      for (const ParamSpec& s : u.params) {
        const std::string& name = names.at(s.stream);
        T* slice = state.slice_weights(s);  // ZeRO 0-2: the whole slice (the shards' weights lie in it)
        if (slice) plan.add(name, value, s, 0, s.numel(), slice);
        for (const auto& sh : shards[&s]) {
          const int64_t a = sh.begin, b = sh.begin + sh.length;
          if (!slice) plan.add(name, value, s, a, b, sh.weights);
          if (sh.master) plan.add(name, value, s, a, b, sh.master);
          plan.add(name, "exp_avg", s, a, b, sh.m);
          plan.add(name, "exp_avg_sq", s, a, b, sh.v);
        }
      }
    }
    out.bytes_read = plan.run();
  } catch (const std::exception& e) {
    err = fmt::format("bad checkpoint {}: {}", dir, e.what());
  }
  throw_if_any(mesh.world(), err, /*after_io=*/true);
  return out;
}

template CheckpointMeta load_checkpoint(const std::string&, const ModelConfig&, ShardedState<float>&, ProcessMesh&);
template CheckpointMeta load_checkpoint(const std::string&, const ModelConfig&, ShardedState<bf16>&, ProcessMesh&);

}  // namespace meshtrain
