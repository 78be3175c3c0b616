// verify_checkpoint and load_checkpoint (checkpoint.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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
#include "meshtrain/checkpoint/shard_file.h"
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

uint32_t file_crc(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> buf(8 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    crc = crc32_of(buf.data(), in.gcount(), crc);
  }
  return crc;
}

// Every file exists with its size; file i's header and CRC-32 are checked by
// rank i % world.
void check_files(const std::string& path, const nlohmann::json& meta, int rank, int world) {
  int i = 0;
  for (const auto& [name, f] : meta["files"].items()) {
    const fs::path p = fs::path(path) / name;
    const int64_t n = bytes_of(p), want = f.at("bytes").get<int64_t>();
    check(n >= 0, "shard file {} is missing", p.string());
    check(n == want, "shard file {} has {} bytes, the metadata records {} (truncated?)", p.string(), n, want);
    if (i++ % world != rank) continue;
    const uint32_t crc = file_crc(p);
    check(crc == f.at("crc32").get<uint32_t>(), "shard file {} fails its checksum (CRC-32 {:08x}, recorded {:08x})",
          p.string(), crc, f.at("crc32").get<uint32_t>());
  }
}

// Reads entries of the shard files of one checkpoint as fp32.
class ShardReader {
 public:
  explicit ShardReader(std::string path) : path_(std::move(path)) {}
  ~ShardReader() {
    for (auto& [name, f] : files_) ::close(f.fd);
  }
  std::vector<float> read(const std::string& file, const std::string& key) {
    File& f = open(file);
    const auto it = f.entries.find(key);
    check(it != f.entries.end(), "shard file {} lacks tensor {}", file, key);
    const StEntry& e = it->second;
    std::vector<char> raw(static_cast<size_t>(e.end - e.begin));
    read_at(f, file, raw.data(), f.data_start + e.begin, raw.size());
    const int64_t n = (e.end - e.begin) / st_dtype_bytes(e.dtype);
    std::vector<float> out(static_cast<size_t>(n));
    if (e.dtype == StDtype::f32) {
      std::memcpy(out.data(), raw.data(), raw.size());
    } else {
      const bf16* b = reinterpret_cast<const bf16*>(raw.data());
      for (int64_t i = 0; i < n; ++i) out[i] = to_f32(b[i]);
    }
    return out;
  }

 private:
  struct File {
    int fd = -1;
    int64_t data_start = 0;
    std::map<std::string, StEntry> entries;
  };
  void read_at(const File& f, const std::string& file, char* dst, int64_t at, size_t n) {
    while (n > 0) {
      const ssize_t r = ::pread(f.fd, dst, n, at);
      if (r < 0 && errno == EINTR) continue;
      check(r > 0, "cannot read shard file {}: {}", file, r < 0 ? std::strerror(errno) : "unexpected end");
      dst += r;
      at += r;
      n -= static_cast<size_t>(r);
    }
  }
  File& open(const std::string& file) {
    if (auto it = files_.find(file); it != files_.end()) return it->second;
    const std::string p = (fs::path(path_) / file).string();
    File f;
    f.fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    check(f.fd >= 0, "cannot open shard file {}: {}", p, std::strerror(errno));
    File& slot = files_.emplace(file, f).first->second;
    const int64_t size = bytes_of(p);
    std::string prefix(8, '\0');
    read_at(slot, file, prefix.data(), 0, 8);
    const int64_t n = st_header_length(prefix, size);
    std::string json(static_cast<size_t>(n), '\0');
    read_at(slot, file, json.data(), 8, json.size());
    slot.data_start = 8 + n;
    slot.entries = st_parse_header(json, size - slot.data_start);
    return slot;
  }
  std::string path_;
  std::map<std::string, File> files_;
};

// The rank's slice of one tensor (local_rows x local_cols of `s`), entry
// `kind` ("master", "exp_avg", ...), gathered from every saved shard that
// intersects it, by global element index.
std::vector<float> read_slice(ShardReader& reader, const nlohmann::json& tensor, const std::string& name,
                              const std::string& kind, const ParamSpec& s) {
  std::vector<float> out(static_cast<size_t>(s.numel()));
  int64_t filled = 0;
  for (const auto& sh : tensor.at("shards")) {
    const std::vector<int64_t> off = sh.at("global_offset"), shape = sh.at("local_shape"),
                               range = sh.at("flattened_range");
    const int64_t lc = shape.at(1), first_row = off[0] + range[0] / lc, last_row = off[0] + (range[1] - 1) / lc;
    if (range[1] <= range[0] || last_row < s.row_offset || first_row >= s.row_offset + s.local_rows) continue;
    if (off[1] + lc <= s.col_offset || off[1] >= s.col_offset + s.local_cols) continue;
    const std::vector<float> v = reader.read(sh.at("file"), name + "/" + kind);
    check(int64_t(v.size()) == range[1] - range[0], "tensor {}/{} in {} has {} elements, its range {}", name, kind,
          sh.at("file").get<std::string>(), v.size(), range[1] - range[0]);
    for (int64_t k = range[0]; k < range[1]; ++k) {
      const int64_t gi = off[0] + k / lc - s.row_offset, gj = off[1] + k % lc - s.col_offset;
      if (gi < 0 || gi >= s.local_rows || gj < 0 || gj >= s.local_cols) continue;
      out[gi * s.local_cols + gj] = v[k - range[0]];
      ++filled;
    }
  }
  check(filled == s.numel(), "tensor {}/{}: the checkpoint covers {} of this rank's {} elements", name, kind, filled,
        s.numel());
  return out;
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
    ShardReader reader(out.path);
    std::map<const ParamSpec*, std::vector<typename ShardedState<T>::OptimizerShard>> shards;
    for (const auto& sh : state.optimizer_shards()) shards[sh.spec].push_back(sh);
    const std::map<uint64_t, std::string> names = names_by_stream(model);
    for (const Unit& u : state.layout().units()) {
      for (const ParamSpec& s : u.params) {
        const std::string& name = names.at(s.stream);
        const nlohmann::json& t = meta["tensors"].at(name);
        const std::vector<float> w = read_slice(reader, t, name, value, s);
        if (T* dst = state.slice_weights(s))
          for (int64_t i = 0; i < s.numel(); ++i) dst[i] = from_f32<T>(w[i]);
        if (!shards.count(&s)) continue;
        const std::vector<float> m = read_slice(reader, t, name, "exp_avg", s), v = read_slice(reader, t, name, "exp_avg_sq", s);
        for (const auto& sh : shards[&s]) {
          for (int64_t k = 0; k < sh.length; ++k) {
            sh.weights[k] = from_f32<T>(w[sh.begin + k]);
            if (sh.master) sh.master[k] = w[sh.begin + k];
            sh.m[k] = m[sh.begin + k];
            sh.v[k] = v[sh.begin + k];
          }
        }
      }
    }
  } catch (const std::exception& e) {
    err = fmt::format("bad checkpoint {}: {}", dir, e.what());
  }
  throw_if_any(mesh.world(), err, /*after_io=*/true);
  return out;
}

template CheckpointMeta load_checkpoint(const std::string&, const ModelConfig&, ShardedState<float>&, ProcessMesh&);
template CheckpointMeta load_checkpoint(const std::string&, const ModelConfig&, ShardedState<bf16>&, ProcessMesh&);

}  // namespace meshtrain
