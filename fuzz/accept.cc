#include "accept.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/metadata.h"
#include "meshtrain/core/error.h"
#include "meshtrain/data/token_file.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/csv.h"
#include "meshtrain/tune/validate.h"

namespace meshtrain::fuzz {

namespace {

nlohmann::json parse_json(std::string_view bytes) {
  try {
    return nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("invalid JSON ({})", e.what()));
  }
}

// The bytes as a file with a path, in memory (memfd): no disk, no clean-up.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes) : fd_(::memfd_create("fuzz-input", MFD_CLOEXEC)) {
    MT_ASSERT(fd_ >= 0);
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t w = ::write(fd_, bytes.data() + done, bytes.size() - done);
      MT_ASSERT(w > 0);
      done += size_t(w);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

void accept_token_file(std::string_view bytes) {
  const MemoryFile f(bytes);
  const data::TokenFile t(f.path());
  t.validate_vocab(50304);
}

void accept_model_json(std::string_view bytes) {
  const nlohmann::json j = parse_json(bytes);
  ModelConfig m;
  try {
    m = j.get<ModelConfig>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(e.what());
  }
  m.validate();
  (void)m.num_parameters();
}

void accept_system_json(std::string_view bytes) {
  const nlohmann::json j = parse_json(bytes);
  check(j.is_object(), "not an object");
  perf::SystemSpec s;
  try {
    s = j.get<perf::SystemSpec>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(e.what());
  }
  s.validate();
  ModelConfig m;
  m.num_layers = 4;
  m.hidden_size = 256;
  m.num_attention_heads = 4;
  m.seq_length = 512;
  m.vocab_size = 1000;
  ParallelConfig p;
  p.tp = std::min(2, s.devices_per_node);
  p.pp = 2;
  p.dp = 2;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  p.bf16 = true;
  const perf::Prediction r = perf::predict(m, p, s, p.tp * p.pp * p.dp);
  // A system the reader accepted must predict finite, positive figures.
  if (!(std::isfinite(r.step_time_s) && r.step_time_s > 0 && std::isfinite(r.tokens_per_s)))
    throw std::logic_error(fmt::format("accepted system predicts step time {} s", r.step_time_s));
}

void accept_csv(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  (void)tune::read_csv(in);
}

void accept_public_runs(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  (void)tune::read_runs(tune::read_csv(in));
}

void accept_checkpoint_metadata(std::string_view bytes) {
  const nlohmann::json meta = checkpoint::parse_metadata(bytes, "metadata.json");
  ModelConfig m;  // configs/models/tiny.json with one layer (fuzz/corpus/checkpoint_metadata)
  m.num_layers = 1;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.seq_length = 16;
  m.max_position_embeddings = 16;
  m.vocab_size = 200;
  checkpoint::check_metadata_tensors(meta, m);
}

const char* input_kind_name(InputKind k) {
  switch (k) {
    case InputKind::token_file: return "token_file";
    case InputKind::model_json: return "model_json";
    case InputKind::system_json: return "system_json";
    case InputKind::csv: return "csv";
    case InputKind::public_runs: return "public_runs";
    case InputKind::checkpoint_metadata: return "checkpoint_metadata";
  }
  return "?";
}

void accept(InputKind k, std::string_view bytes) {
  switch (k) {
    case InputKind::token_file: return accept_token_file(bytes);
    case InputKind::model_json: return accept_model_json(bytes);
    case InputKind::system_json: return accept_system_json(bytes);
    case InputKind::csv: return accept_csv(bytes);
    case InputKind::public_runs: return accept_public_runs(bytes);
    case InputKind::checkpoint_metadata: return accept_checkpoint_metadata(bytes);
  }
}

}  // namespace meshtrain::fuzz
