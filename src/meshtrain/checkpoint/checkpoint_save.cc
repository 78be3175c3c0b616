// CheckpointWriter: snapshot, write, commit (checkpoint.h).
#include <atomic>
#include <csignal>
#include <cstring>
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
  std::atomic<bool> written{false};  // the background write ended (error or not)
  std::string error;                 // this rank's write failure
  FileDigest digest;
  double write_s = 0;
  // After every rank wrote its shard: rank 0 writes the metadata and commits
  // the folder (in `committer` for an asynchronous save).
  bool publishing = false;
  std::thread committer;
  std::atomic<bool> committed{false};
  std::string commit_error;
  int64_t meta_bytes = 0;
  double commit_s = 0;
};

namespace {

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
    j["files"][file] = {{"rank", r},
                        {"bytes", f.at("bytes")},
                        {"crc32", f.at("crc32")},
                        {"block_bytes", kCrcBlockBytes},
                        {"block_crc32", f.at("block_crc32")}};
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
    p.digest = write_shard_file((fs::path(p.staged) / p.file.name).string(), p.file.parts());
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  p.write_s = now_s() - t0;
  if (p.die) std::raise(SIGKILL);
}

// Rank 0: metadata.json, then the folder committed (checkpoint_dir.h); on
// failure the staged folder is removed and the error kept for agreement.
void commit_files(CheckpointWriter::Pending& p, const std::vector<std::string>& records, const std::string& dir,
                  int keep_last) {
  const double t0 = now_s();
  try {
    const std::string meta = build_metadata(p, records).dump(1);
    write_durably((fs::path(p.staged) / "metadata.json").string(), {meta});
    p.meta_bytes = static_cast<int64_t>(meta.size());
    commit_dir(dir, p.staged, p.name, keep_last);
  } catch (const std::exception& e) {
    p.commit_error = e.what();
    discard_dir(p.staged);
  }
  p.commit_s = now_s() - t0;
  p.committed.store(true, std::memory_order_release);
}

}  // namespace

nlohmann::json SaveRecord::to_json() const {
  return {{"iteration", iteration}, {"path", path},       {"bytes", bytes},       {"wait_s", wait_s},
          {"snapshot_s", snapshot_s}, {"write_s", write_s}, {"commit_s", commit_s}, {"stall_s", stall_s},
          {"async", async}};
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
  if (pending_ && pending_->committer.joinable()) pending_->committer.join();
}

template <class T>
void CheckpointWriter::prepare(ShardedState<T>& state, int rank) {
  if (!async_) return;
  const int64_t n = round_up(shard_file(state, rank).bytes(), kIoAlign);
  snapshot_ = IoBuffer(n);
  std::memset(snapshot_.data(), 0, static_cast<size_t>(n));  // fault the pages in now, not in the first save
}

CheckpointWriter::WriteState CheckpointWriter::write_state() const {
  if (!pending_) return WriteState::none;
  const Pending& p = *pending_;
  if (!(p.publishing ? p.committed : p.written).load(std::memory_order_acquire)) return WriteState::writing;
  return (p.publishing ? p.commit_error : p.error).empty() ? WriteState::written : WriteState::failed;
}

template <class T>
SaveRecord CheckpointWriter::save(const CheckpointMeta& meta, const nlohmann::json& run, ShardedState<T>& state,
                                  ProcessMesh& mesh, bool die_before_commit) {
  const double t0 = now_s();
  SaveRecord r;
  if (pending_) r.wait_s = (wait(mesh), now_s() - t0);  // counted in the stall of the save it waited for
  const double ts0 = now_s();
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
  p->file = shard_file(state, mesh.rank());
  pending_ = std::move(p);
  r.iteration = meta.iteration;
  r.path = (fs::path(dir_) / pending_->name).string();
  r.async = async_;
  records_.push_back(r);
  if (async_) {
    const double ts = now_s();
    snapshot(pending_->file, snapshot_);
    records_.back().snapshot_s = now_s() - ts;
    pending_->thread = std::thread([q = pending_.get()] {
      write_shard(*q);
      q->written.store(true, std::memory_order_release);
    });
    records_.back().stall_s = now_s() - ts0;
    return records_.back();
  }
  write_shard(*pending_);
  wait(mesh);
  records_.back().stall_s = now_s() - ts0;
  return records_.back();
}

SaveRecord CheckpointWriter::wait(ProcessMesh& mesh) {
  SaveRecord r;
  r.iteration = -1;
  while (pending_) r = advance(mesh);
  return r;
}

SaveRecord CheckpointWriter::advance(ProcessMesh& mesh) {
  const double t0 = now_s();
  SaveRecord* rec = &records_.back();  // the pending save is the last one
  if (!pending_->publishing) {
    publish(mesh);
    rec->stall_s += now_s() - t0;
    SaveRecord none;
    none.iteration = -1;
    return none;
  }
  const SaveRecord done = finalize(mesh);
  rec->bytes = done.bytes;
  rec->write_s = done.write_s;
  rec->commit_s = done.commit_s;
  rec->stall_s += now_s() - t0;
  return *rec;
}

// Joins the write and agrees on its outcome; gathers every rank's file
// record on rank 0, which commits (asynchronous saves: in a thread).
void CheckpointWriter::publish(ProcessMesh& mesh) {
  Pending& p = *pending_;
  if (p.thread.joinable()) p.thread.join();
  const std::string err = agree_on_error(mesh.world(), p.error, /*after_io=*/true);
  if (!err.empty()) {
    if (mesh.rank() == 0) discard_dir(p.staged);
    const int it = p.meta.iteration;
    pending_.reset();
    throw AgreedError(
        fmt::format("cannot save checkpoint of iteration {}: {} (the previous checkpoint is intact)", it, err));
  }
  const nlohmann::json mine{{"file", p.file.name},
                            {"bytes", p.file.bytes()},
                            {"crc32", p.digest.crc32},
                            {"block_crc32", p.digest.block_crc32},
                            {"tensors", p.file.tensors}};
  std::vector<std::string> records = gather_strings(mesh.world(), mine.dump());
  p.publishing = true;
  if (mesh.rank() != 0)
    p.committed.store(true, std::memory_order_release);
  else if (async_)
    p.committer = std::thread([&p, rs = std::move(records), this] {
      commit_files(p, rs, dir_, keep_last_);
    });
  else
    commit_files(p, records, dir_, keep_last_);
}

// Joins rank 0's commit and agrees on its outcome; the figures are the
// slowest rank's (bytes: all files and the metadata).
SaveRecord CheckpointWriter::finalize(ProcessMesh& mesh) {
  Pending& p = *pending_;
  if (p.committer.joinable()) p.committer.join();
  const std::string err = agree_on_error(mesh.world(), p.commit_error, /*after_io=*/true);
  SaveRecord r;
  r.iteration = p.meta.iteration;
  r.path = (fs::path(dir_) / p.name).string();
  double times[2] = {p.write_s, p.commit_s}, total = double(p.file.bytes() + p.meta_bytes);
  pending_.reset();
  if (!err.empty())
    throw AgreedError(fmt::format("cannot save checkpoint of iteration {}: {} (the previous checkpoint is intact)",
                                  r.iteration, err));
  mesh.world().all_reduce(times, 2, ReduceOp::max);
  mesh.world().all_reduce(&total, 1);
  r.write_s = times[0];
  r.commit_s = times[1];
  r.bytes = static_cast<int64_t>(total);
  return r;
}

template void CheckpointWriter::prepare(ShardedState<float>&, int);
template void CheckpointWriter::prepare(ShardedState<bf16>&, int);
template SaveRecord CheckpointWriter::save(const CheckpointMeta&, const nlohmann::json&, ShardedState<float>&,
                                           ProcessMesh&, bool);
template SaveRecord CheckpointWriter::save(const CheckpointMeta&, const nlohmann::json&, ShardedState<bf16>&,
                                           ProcessMesh&, bool);

}  // namespace meshtrain
