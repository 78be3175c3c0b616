// CheckpointWriter: snapshot, write, commit (checkpoint.h).
#include <csignal>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "meshtrain/checkpoint/checkpoint.h"
#include "meshtrain/checkpoint/checkpoint_dir.h"
#include "meshtrain/checkpoint/shard_file.h"
#include "meshtrain/comm/agreed_error.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/clock.h"
#include "meshtrain/core/format.h"
#include "meshtrain/measure/gather.h"

namespace meshtrain {

using namespace checkpoint;
namespace fs = std::filesystem;

struct CheckpointWriter::Pending {
  CheckpointMeta meta;
  nlohmann::json run;
  bool bf16 = false, die = false;
  std::string name, staged;
  ShardFile file;
  std::thread thread;
  std::string error;  // this rank's write failure
  uint32_t crc = 0;
  double snapshot_s = 0, write_s = 0, stall_s = 0;
};

namespace {

void write_shard(CheckpointWriter::Pending& p);

// metadata.json from the run and every rank's file record.
nlohmann::json build_metadata(const CheckpointWriter::Pending& p, const std::vector<std::string>& records) {
  nlohmann::json j;
  j["format"] = "meshtrain-checkpoint";
  j["format_version"] = kCheckpointFormatVersion;
  j["writer"] = {{"program", "meshtrain"}, {"commit", build_commit()}};
  j["iteration"] = p.meta.iteration;
  j["consumed_samples"] = p.meta.consumed_samples;
  j["skipped_steps"] = p.meta.skipped_steps;
  j["rng"] = {{"generator", "counter-based splitmix64 (values are functions of seed, stream, index)"},
              {"seed", p.meta.seed},
              {"data_iteration", p.meta.iteration}};
  j["model"] = p.run.at("model");
  j["parallel"] = p.run.at("parallel");
  j["world_size"] = records.size();
  j["run"] = p.run;
  j["dtypes"] = {{"weight", p.bf16 ? "BF16" : "F32"}, {"exp_avg", "F32"}, {"exp_avg_sq", "F32"}};
  if (p.bf16) j["dtypes"]["master"] = "F32";
  j["tensors"] = nlohmann::json::object();
  j["files"] = nlohmann::json::object();
  for (size_t r = 0; r < records.size(); ++r) {
    const nlohmann::json f = nlohmann::json::parse(records[r]);
    const std::string file = f.at("file");
    j["files"][file] = {{"rank", r}, {"bytes", f.at("bytes")}, {"crc32", f.at("crc32")}};
    for (const auto& [name, t] : f.at("tensors").items()) {
      nlohmann::json& out = j["tensors"][name];
      out["global_shape"] = t.at("global_shape");
      nlohmann::json shard = t.at("shard");
      shard["file"] = file;
      out["shards"].push_back(shard);
    }
  }
  return j;
}

void write_shard(CheckpointWriter::Pending& p) {
  const double t0 = now_s();
  try {
    std::vector<std::string_view> parts{p.file.header};
    parts.insert(parts.end(), p.file.data.begin(), p.file.data.end());
    write_durably((fs::path(p.staged) / p.file.name).string(), parts);
    for (std::string_view d : parts) p.crc = crc32_of(d.data(), static_cast<int64_t>(d.size()), p.crc);
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  p.write_s = now_s() - t0;
  if (p.die) std::raise(SIGKILL);
}

}  // namespace

nlohmann::json SaveRecord::to_json() const {
  return {{"iteration", iteration}, {"path", path},         {"bytes", bytes},
          {"snapshot_s", snapshot_s}, {"write_s", write_s}, {"commit_s", commit_s},
          {"stall_s", stall_s},     {"async", async}};
}

std::string SaveRecord::summary() const {
  if (async && bytes == 0)
    return fmt::format("writing checkpoint {} in the background (snapshot {:.3f} s, training stalled {:.3f} s)", path,
                       snapshot_s, stall_s);
  return fmt::format("saved checkpoint {} ({}, write {:.3f} s = {}, training stalled {:.3f} s{})", path,
                     format_bytes(double(bytes)), write_s, format_rate(write_s > 0 ? bytes / write_s : 0), stall_s,
                     async ? ", asynchronous" : "");
}

CheckpointWriter::CheckpointWriter(std::string dir, int keep_last, bool async)
    : dir_(std::move(dir)), keep_last_(keep_last), async_(async) {}

CheckpointWriter::~CheckpointWriter() {
  if (pending_ && pending_->thread.joinable()) pending_->thread.join();
}

template <class T>
SaveRecord CheckpointWriter::save(const CheckpointMeta& meta, const nlohmann::json& run, ShardedState<T>& state,
                                  ProcessMesh& mesh, bool die_before_commit) {
  const double t0 = now_s();
  wait(mesh);
  auto p = std::make_unique<Pending>();
  p->meta = meta;
  p->run = run;
  p->bf16 = !std::is_same_v<T, float>;
  p->die = die_before_commit;
  p->name = iteration_dir_name(meta.iteration);
  p->staged = (fs::path(dir_) / (p->name + ".tmp")).string();
  std::string err;
  if (mesh.rank() == 0) {
    try {
      stage_dir(dir_, p->name);
    } catch (const std::exception& e) {
      err = fmt::format("cannot save checkpoint of iteration {}: {}", meta.iteration, e.what());
    }
  }
  throw_if_any(mesh.world(), err);  // also: the folder exists before any rank writes
  const double ts = now_s();
  p->file = shard_file(state, mesh.rank(), /*copy=*/async_);
  p->snapshot_s = now_s() - ts;
  pending_ = std::move(p);
  if (async_) {
    pending_->thread = std::thread([q = pending_.get()] { write_shard(*q); });
    pending_->stall_s = now_s() - t0;
    SaveRecord r;
    r.iteration = meta.iteration;
    r.path = (fs::path(dir_) / pending_->name).string();
    r.snapshot_s = pending_->snapshot_s;
    r.stall_s = pending_->stall_s;
    r.async = true;
    records_.push_back(r);
    return r;
  }
  write_shard(*pending_);
  SaveRecord r = commit(mesh);
  r.stall_s = now_s() - t0;
  records_.push_back(r);
  return r;
}

SaveRecord CheckpointWriter::wait(ProcessMesh& mesh) {
  if (!pending_) {
    SaveRecord none;
    none.iteration = -1;
    return none;
  }
  SaveRecord r = commit(mesh);
  r.async = true;
  for (SaveRecord& s : records_) {
    if (s.iteration != r.iteration || !s.async) continue;
    r.snapshot_s = s.snapshot_s;
    r.stall_s = s.stall_s;
    s = r;
  }
  return r;
}

SaveRecord CheckpointWriter::commit(ProcessMesh& mesh) {
  Pending& p = *pending_;
  if (p.thread.joinable()) p.thread.join();
  const double tc = now_s();
  std::string err = agree_on_error(mesh.world(), p.error, /*after_io=*/true);
  const int64_t bytes = p.file.bytes();
  const nlohmann::json mine{{"file", p.file.name}, {"bytes", bytes}, {"crc32", p.crc}, {"tensors", p.file.tensors}};
  const std::vector<std::string> records = gather_strings(mesh.world(), err.empty() ? mine.dump() : "");
  SaveRecord r;
  r.iteration = p.meta.iteration;
  r.path = (fs::path(dir_) / p.name).string();
  if (mesh.rank() == 0 && err.empty()) {
    try {
      const std::string meta = build_metadata(p, records).dump(1);
      write_durably((fs::path(p.staged) / "metadata.json").string(), {meta});
      r.bytes = static_cast<int64_t>(meta.size());
      commit_dir(dir_, p.staged, p.name, keep_last_);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  if (mesh.rank() == 0 && !err.empty()) discard_dir(p.staged);
  err = agree_on_error(mesh.world(), err, /*after_io=*/true);
  double times[3] = {p.snapshot_s, p.write_s, now_s() - tc}, total = double(bytes + r.bytes);
  pending_.reset();
  if (!err.empty())
    throw AgreedError(fmt::format("cannot save checkpoint of iteration {}: {} (the previous checkpoint is intact)",
                                  r.iteration, err));
  mesh.world().all_reduce(times, 3, ReduceOp::max);
  mesh.world().all_reduce(&total, 1);
  r.snapshot_s = times[0];
  r.write_s = times[1];
  r.commit_s = times[2];
  r.bytes = static_cast<int64_t>(total);
  return r;
}

template SaveRecord CheckpointWriter::save(const CheckpointMeta&, const nlohmann::json&, ShardedState<float>&,
                                           ProcessMesh&, bool);
template SaveRecord CheckpointWriter::save(const CheckpointMeta&, const nlohmann::json&, ShardedState<bf16>&,
                                           ProcessMesh&, bool);

}  // namespace meshtrain
