#include "meshtrain/tune/published_run.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/core/text.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/system_match.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::tune {

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// `v` without thousands separators where it groups digits by three before
// any decimal point ("851,600" or "1,536.5"); as given otherwise ("1,5"
// stays, and is no number).
std::string without_thousands(const std::string& v) {
  const size_t end = std::min(v.find('.'), v.size());
  std::string digits;
  size_t run = 0;
  bool grouped = false;
  for (size_t i = 0; i < end; ++i) {
    if (v[i] == ',') {
      if (run == 0 || (grouped && run != 3) || run > 3) return v;
      grouped = true;
      run = 0;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return v;
    digits += v[i];
    ++run;
  }
  if (!grouped || run != 3) return v;
  return digits + v.substr(end);
}

// A field without the note in parentheses or brackets that tables append
// to a value ("2048 (sequences)", "yes (with TP)"); the whole field where
// the value would be empty.
std::string without_note(const std::string& v) {
  const size_t at = v.find_first_of("([");
  if (at == std::string::npos || at == 0) return v;
  return trim(v.substr(0, at));
}

// The field without the unit its column is in, written after the number
// ("150 TFLOP/s" in tflops_per_gpu, "9.5s" in iter_time_s, "175B" in
// params_b); what is left must still be a number, so that "3.2M tokens/s"
// or "950 ms" is refused rather than misread.
std::string without_unit(const std::string& v, const std::string& col) {
  static const std::map<std::string, std::vector<std::string>> units = {
      {"tflops_per_gpu", {"tflops", "tflop/s", "tflops/s", "tflop/s/gpu", "tflops/gpu", "tf/s", "tf"}},
      {"tokens_per_s", {"tokens/s", "tok/s", "tokens/sec", "tokens/second"}},
      {"tokens_per_s_per_gpu", {"tokens/s", "tok/s", "tokens/s/gpu", "tok/s/gpu", "tokens/sec", "tokens/gpu/s"}},
      {"iter_time_s", {"s", "sec", "secs", "seconds"}},
      {"seq_len", {"tokens"}},
      {"num_gpus", {"gpus", "gcds"}},
      {"params_b", {"b"}}};
  const auto it = units.find(col);
  if (it == units.end()) return v;
  const std::string lower = ascii_lower(v);
  for (const std::string& u : it->second)
    if (lower.size() > u.size() && lower.compare(lower.size() - u.size(), u.size(), u) == 0)
      return trim(v.substr(0, v.size() - u.size()));
  return v;
}

// A numeric field: nullopt when blank; throws Error when not a number.
// Thousands separators are read ("851,600"), a note in parentheses after
// the number ("128 (16 nodes)"), the column's own unit ("150 TFLOP/s") and
// an approximation sign before it ("~150") are dropped, and a percentage
// column may carry its sign ("47.8%").
std::optional<double> number(const CsvTable& t, size_t r, const std::string& col) {
  std::string v = without_unit(without_note(trim(t.field(r, col))), col);
  if (v.size() > 1 && v[0] == '~') v = trim(v.substr(1));
  v = without_thousands(v);
  if (v.size() > 1 && v.back() == '%' && col.size() > 4 && col.compare(col.size() - 4, 4, "_pct") == 0) v.pop_back();
  if (v.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    check(used == v.size() && std::isfinite(x), "column {}: '{}' is not a number", col, v);
    return x;
  } catch (const std::logic_error&) {
    throw Error(fmt::format("column {}: '{}' is not a number", col, v));
  }
}

// An integer field in [lo, 1e9]: nullopt when blank; throws Error otherwise.
std::optional<int> count(const CsvTable& t, size_t r, const std::string& col, int lo = 1) {
  const auto x = number(t, r, col);
  if (!x) return std::nullopt;
  check(*x == std::floor(*x) && *x >= lo && *x <= 1e9, "column {}: '{}' is not an integer >= {}", col,
        trim(t.field(r, col)), lo);
  return int(*x);
}

int required_count(const CsvTable& t, size_t r, const std::string& col) {
  const auto x = count(t, r, col);
  check(x.has_value(), "column {} is blank", col);
  return *x;
}

std::optional<bool> yes_no(const CsvTable& t, size_t r, const std::string& col) {
  const std::string v = ascii_lower(without_note(trim(t.field(r, col))));
  if (v.empty()) return std::nullopt;
  if (v == "yes" || v == "y" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "n" || v == "false" || v == "0" || v == "off") return false;
  throw Error(fmt::format("column {}: '{}' is not yes or no", col, v));
}

// The columns a prediction reads; equal values give equal predictions.
// clang-format off
constexpr const char* kKeyColumns[] = {
    "system", "layers", "hidden", "heads", "kv_heads", "ffn", "seq_len", "vocab", "num_gpus", "global_batch",
    "tp", "pp", "vpp", "zero_stage", "dp", "model_parallel", "cp", "dp_shard", "micro_batch", "grad_accum",
    "recompute", "seq_parallel", "flash_attn", "precision", "profile", "gated_mlp", "recompute_num_layers",
    "first_stage_layers", "last_stage_layers", "stage_counting", "model_name"};
// clang-format on

// Model families whose MLP is gated (SwiGLU or GeGLU: Llama 1-3, Mistral and
// Mixtral, Qwen, Gemma, DeepSeek, Baichuan, InternLM model cards), for a row
// that leaves gated_mlp blank.
bool gated_family(const std::string& model_name) {
  const std::string n = ascii_lower(model_name);
  if (n.rfind("l2-", 0) == 0 || n.rfind("l3-", 0) == 0) return true;  // torchtitan's "L3-8B"
  for (const char* family : {"llama", "mistral", "mixtral", "qwen", "gemma", "deepseek", "baichuan", "internlm"})
    if (n.find(family) != std::string::npos) return true;
  return false;
}

// The Llama generation a lower-case model name names ("llama 3.1 8b",
// "llama-2-70b", "llama3", torchtitan's "l3-8b"); 0 for none.
int llama_generation(const std::string& n) {
  if (n.size() > 3 && n[0] == 'l' && (n[1] == '2' || n[1] == '3') && n[2] == '-') return n[1] - '0';
  for (size_t at = n.find("llama"); at != std::string::npos; at = n.find("llama", at + 1)) {
    size_t i = at + 5;
    if (i < n.size() && (n[i] == ' ' || n[i] == '-' || n[i] == '_')) ++i;
    if (i < n.size() && (n[i] == '2' || n[i] == '3') &&
        (i + 1 == n.size() || !std::isdigit(static_cast<unsigned char>(n[i + 1]))))
      return n[i] - '0';
  }
  return 0;
}

// Key-value heads where a row leaves kv_heads blank: 8 for the families
// whose released models all use grouped-query attention with 8 (their
// config.json num_key_value_heads): every Llama 3 size (Llama Team 2024,
// Table 3), Llama 2 at 34B and 70B (Touvron et al. 2023, Table 1: GQA for
// those two), Mistral 7B and Mixtral, Nemotron-4 15B and 340B (Parmar et al.
// 2024, Table 1; NVIDIA 2024, Table 1); otherwise as many as the attention
// heads (0).
int family_kv_heads(const std::string& model_name, int heads) {
  const std::string n = ascii_lower(model_name);
  const int llama = llama_generation(n);
  auto has = [&](const char* w) { return n.find(w) != std::string::npos; };
  const bool gqa = llama == 3 || (llama == 2 && (has("70b") || has("34b"))) || has("mistral") || has("mixtral") ||
                   has("nemotron-4") || has("nemotron4") || has("nemotron 4");
  return gqa && heads > 8 && heads % 8 == 0 ? 8 : 0;
}

// The vocabulary where a row leaves vocab blank, by the family its name
// names (each family's tokenizer, as its model card or config.json gives
// vocab_size): Llama 3 128,256; Llama 1-2, Mistral and Mixtral 32,000;
// BLOOM 250,880; BloombergGPT 131,072; Nemotron-4 and Gemma 256,000; OPT
// 50,272; MPT 50,368; GPT-NeoX-20B 50,432; Falcon 65,024; Qwen 151,936.
// Otherwise GPT-2's BPE of 50,257 padded as Megatron-LM pads it, 51,200
// (Narayanan et al. 2021: 'a vocabulary size of 51,200'), which the caller
// takes where this is nullopt: no family named.
std::optional<int> family_vocab(const std::string& model_name) {
  const std::string n = ascii_lower(model_name);
  static const std::pair<const char*, int> families[] = {
      {"bloomberggpt", 131072}, {"bloom", 250880},  {"nemotron", 256000}, {"gemma", 256000},
      {"opt", 50272},           {"mpt", 50368},     {"neox", 50432},      {"falcon", 65024},
      {"qwen", 151936},         {"mistral", 32000}, {"mixtral", 32000}};
  const int llama = llama_generation(n);
  if (llama == 3) return 128256;
  if (llama == 2 || n.find("llama") != std::string::npos) return 32000;
  for (const auto& [family, vocab] : families)
    if (has_word(n, family)) return vocab;
  return std::nullopt;
}

// The parameter count a model's name states ("Llama 3.1 8B", "L3-70B"), in
// billions; 0 for none.
double named_size_b(const std::string& name) {
  static const std::regex size("\\b(\\d{1,5}(?:\\.\\d{1,3})?)\\s*b\\b", std::regex::icase);
  double best = 0;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), size); it != std::sregex_iterator(); ++it)
    best = std::max(best, std::stod((*it)[1].str()));
  return best;
}

// A gated MLP's width where a row leaves ffn blank (a plain MLP is 4h in
// every GPT-style family here). Llama's rule is 8h/3 times a per-size
// multiplier (1.0; 1.3 for Llama 2 70B and Llama 3 8B and 70B; 1.2 for
// Llama 3 405B), up to a multiple of 256 or more (Touvron et al. 2023; the
// models' params.json). The multiplier follows from the parameter count:
// the published one (params_b), else the name's; the width that gives it,
// the rest shaped as Llama (untied output layer, no position table, no
// biases, RMSNorm), to a multiple of 256. A width within 10% of the plain
// rule is the rule (a rounded count: "7B" is 6.74 billion); with no count,
// the rule.
int gated_ffn(const ModelConfig& shape, double params_b) {
  const int rule = (8 * shape.hidden_size / 3 + 255) / 256 * 256;
  if (!(params_b > 0)) params_b = named_size_b(shape.name);
  if (!(params_b > 0)) return rule;
  ModelConfig m = shape;
  m.tied_embeddings = false;
  m.learned_positions = false;
  m.bias_linear = false;
  m.rmsnorm = true;
  m.ffn_hidden_size = 256;
  const double at256 = double(m.num_parameters());
  m.ffn_hidden_size = 512;
  const double per_unit = (double(m.num_parameters()) - at256) / 256;
  const double width = 256 + (params_b * 1e9 - at256) / per_unit;
  if (!(width >= 2.0 * shape.hidden_size && width <= 8.0 * shape.hidden_size)) return rule;
  const int rounded = int(std::lround(width / 256)) * 256;
  return std::fabs(double(rounded) / rule - 1) < 0.1 ? rule : rounded;
}

void read_model(const CsvTable& t, size_t r, ModelConfig& m, RunRow& p) {
  m.name = trim(t.field(r, "model_name"));
  m.num_layers = required_count(t, r, "layers");
  m.hidden_size = required_count(t, r, "hidden");
  m.num_attention_heads = required_count(t, r, "heads");
  if (auto kv = count(t, r, "kv_heads"))
    m.num_kv_heads = *kv;
  else
    m.num_kv_heads = family_kv_heads(m.name, m.num_attention_heads);
  if (auto g = yes_no(t, r, "gated_mlp"))
    m.gated_mlp = *g;
  else
    m.gated_mlp = gated_family(m.name);
  m.seq_length = required_count(t, r, "seq_len");
  if (auto v = count(t, r, "vocab")) {
    m.vocab_size = *v;
  } else {
    const std::optional<int> named = family_vocab(m.name);
    m.vocab_size = named.value_or(51200);
    p.inferred["vocab"] = fmt::format("{} ({})", m.vocab_size, named ? "from model name" : "GPT-2's, padded");
  }
  if (auto f = count(t, r, "ffn"))
    m.ffn_hidden_size = *f;
  else if (m.gated_mlp)
    m.ffn_hidden_size = gated_ffn(m, number(t, r, "params_b").value_or(0));
  m.validate();
}

// Whether the row publishes its mesh: tp and pp both given (cp, blank, is 1).
bool mesh_published(const SearchSpace& s) { return !s.tp.empty() && !s.pp.empty(); }

// Column global_batch; where blank, the sequences of a step as the row
// gives them otherwise: tokens a second x seconds a step / sequence length,
// else micro-batch x accumulation x DP where the mesh is published (tp and
// pp, read by read_mesh before), the accumulation 1 where blank only
// without a pipeline (a pipeline runs many micro-batches a step, how many
// unsaid). Refused where neither.
void read_global_batch(const CsvTable& t, size_t r, RunRow& p) {
  if (auto g = count(t, r, "global_batch")) {
    p.global_batch = *g;
    return;
  }
  std::optional<double> rate = number(t, r, "tokens_per_s");
  if (!rate)
    if (auto per_gpu = number(t, r, "tokens_per_s_per_gpu")) rate = *per_gpu * p.num_gpus;
  const std::optional<double> step = number(t, r, "iter_time_s");
  if (rate && step && *rate > 0 && *step > 0) {
    p.global_batch = int(std::lround(*rate * *step / p.model.seq_length));
    check(p.global_batch > 0, "column global_batch is blank and tokens/s x iter_time_s is under one sequence");
    p.inferred["global_batch"] = fmt::format("{} (tokens/s x iteration time)", p.global_batch);
    return;
  }
  const ParallelConfig& f = p.fallback;
  const bool mesh = mesh_published(p.space);
  const auto mb = count(t, r, "micro_batch");
  auto ga = count(t, r, "grad_accum");
  if (!ga && mesh && f.pp == 1) ga = 1;
  check(mb && ga && mesh,
        "column global_batch is blank, and neither tokens/s with iter_time_s nor micro_batch with tp, pp and "
        "grad_accum (blank: 1 only at pp 1) gives it");
  p.global_batch = *mb * *ga * f.dp;
  p.inferred["global_batch"] = fmt::format("{} (micro-batch x accumulation x DP {})", p.global_batch, f.dp);
}

// Uneven pipeline stages (parallel/stage_layers.h): first_stage_layers and
// last_stage_layers (Megatron-LM's --decoder-first/last-pipeline-num-layers),
// stage_counting "embedding-head" (Megatron-DeepSpeed counting the embedding
// and the head as layers); blank: even, transformer layers only.
void read_stage_split(const CsvTable& t, size_t r, RunRow& p) {
  const int first = count(t, r, "first_stage_layers").value_or(0);
  const int last = count(t, r, "last_stage_layers").value_or(0);
  const std::string named = ascii_lower(trim(t.field(r, "stage_counting")));
  if (named.empty()) p.blanks.push_back("stage_counting");
  const StageCounting counting = parse_stage_counting(named);
  p.space.first_stage_layers = p.fallback.first_stage_layers = first;
  p.space.last_stage_layers = p.fallback.last_stage_layers = last;
  p.space.stage_counting = p.fallback.stage_counting = counting;
}

// A run whose layers do not divide by its published PP split them somehow,
// and one that publishes no PP may have. Where neither the row nor its
// profile says how (no first/last counts, no counting, an even partition),
// also try the embedding and the head counted as layers: Megatron-LM's
// first = last = (layers + 2) / pp - 1, as Llama 3 405B's 126 layers on 16
// stages.
void plan_unpublished_split(RunRow& p) {
  const SearchSpace& s = p.space;
  const bool blank_split = s.first_stage_layers == 0 && s.last_stage_layers == 0 &&
                           s.stage_counting == StageCounting::transformer && s.stage_partition == StagePartition::even;
  if (blank_split && (s.pp.empty() || (s.pp.size() == 1 && p.model.num_layers % s.pp.front() != 0))) {
    p.space.search_stage_splits = true;
    p.widened.search_stage_splits = true;
  }
}

// A column's published value fixes the search space's knob (dst) and the
// fallback (fb); a blank leaves the knob open, is recorded, and the fallback
// becomes `blank`.
template <typename T>
void read_knob(std::optional<T> x, const char* col, std::vector<T>& dst, T& fb, T blank, RunRow& p) {
  if (x) {
    dst = {*x};
    fb = *x;
  } else {
    p.blanks.push_back(col);
    fb = blank;
  }
}

// Whether the framework or notes column names hybrid sharding (PyTorch
// FSDP's HYBRID_SHARD or _HYBRID_SHARD_ZERO2, "HSDP"), or the framework
// column MiCS (notes compare runs with MiCS), which shard inside a group and
// replicate across groups, for a row without a dp_shard figure: the DP
// sizes of shard group it could have run. FSDP's hybrid sharding shards
// within one node (its default process groups: the DP ranks of one node of
// the row's system, devices per node over TP x CP); MiCS's partition group
// is a setting (DeepSpeed's mics_shard_size, SageMaker's
// sharded_data_parallel_degree) with no such default, so one node and every
// power of two of nodes below the whole DP group are planned over. Empty
// (the whole DP group) where none is named.
std::vector<int> read_hybrid_shard(const CsvTable& t, size_t r, RunRow& p) {
  const std::string framework = ascii_lower(t.field(r, "framework"));
  const std::string text = framework + " " + ascii_lower(t.field(r, "notes"));
  bool fsdp = text.find("hsdp") != std::string::npos;
  for (const char* form : {"hybrid_shard", "hybrid shard", "hybrid-shard", "hybrid sharding"})
    fsdp = fsdp || text.find(form) != std::string::npos;
  const bool mics = has_word(framework, "mics");
  if (!fsdp && !mics) return {};
  const ParallelConfig& f = p.fallback;
  const int node = perf::load_system_spec(p.system).devices_per_node;
  const int ranks = f.tp * f.cp;
  if (node % ranks != 0 || node / ranks < 2 || f.dp % (node / ranks) != 0 || node / ranks == f.dp) return {};
  std::vector<int> shards{node / ranks};
  if (!fsdp)
    for (int group = 2 * shards.back(); group < f.dp && f.dp % group == 0; group *= 2) shards.push_back(group);
  p.hybrid_shard_inferred = shards.front();
  return shards;
}

// Column zero_stage as a number or as tables name the stage ("ZeRO-1",
// "ZeRO stage 3", "stage 2"); nullopt when blank.
std::optional<int> read_zero_stage(const CsvTable& t, size_t r) {
  std::string v = ascii_lower(without_note(trim(t.field(r, "zero_stage"))));
  if (v.empty()) return std::nullopt;
  for (const char* prefix : {"zero", "-", "_", " ", "stage"})
    if (v.rfind(prefix, 0) == 0) v = trim(v.substr(std::string(prefix).size()));
  check(v.size() == 1 && v[0] >= '0' && v[0] <= '3', "column zero_stage: '{}' is not 0, 1, 2 or 3",
        trim(t.field(r, "zero_stage")));
  return v[0] - '0';
}

// The mesh columns of a row as published; nullopt where blank.
struct MeshColumns {
  std::optional<int> tp, pp, cp, dp, mp;  // mp: model_parallel (TP x PP)
};

// One of tp and pp blank where the columns fix it: the model-parallel size
// over the other, else num_gpus over dp x cp and the other. Said as
// inferred; a quotient that is not whole leaves the knob to the plan.
void complete_mesh(MeshColumns& c, int64_t num_gpus, RunRow& p) {
  if (c.tp.has_value() == c.pp.has_value()) return;
  const bool tp_blank = !c.tp;
  const int other = tp_blank ? *c.pp : *c.tp;
  const int64_t cp = c.cp.value_or(1);
  int64_t whole = 0;
  std::string from;
  if (c.mp) {
    whole = *c.mp;
    from = fmt::format("model_parallel / {}", tp_blank ? "pp" : "tp");
  } else if (c.dp && num_gpus % (*c.dp * cp) == 0) {
    whole = num_gpus / (*c.dp * cp);
    from = fmt::format("num_gpus / (dp x cp x {})", tp_blank ? "pp" : "tp");
  }
  if (whole < other || whole % other != 0) return;
  const int x = int(whole / other);
  (tp_blank ? c.tp : c.pp) = x;
  p.inferred[tp_blank ? "tp" : "pp"] = fmt::format("{} ({})", x, from);
}

// A blank cp is no context parallelism, except where tp, pp and dp are all
// published and leave a whole factor of num_gpus over: tables printed
// before the column existed give DP without the CP that shares its ranks
// (the Llama 3 paper's Table 4 prints CP apart; a row copied without it
// would otherwise be refused).
int read_cp(const MeshColumns& c, int64_t num_gpus, RunRow& p) {
  if (c.cp) return *c.cp;
  if (!c.dp || !c.tp || !c.pp) return 1;
  const int64_t rest = int64_t(*c.dp) * *c.tp * *c.pp;
  if (num_gpus % rest != 0 || num_gpus / rest < 2) return 1;
  const int cp = int(num_gpus / rest);
  p.inferred["cp"] = fmt::format("{} (num_gpus / (dp x tp x pp))", cp);
  return cp;
}

// Columns tp, pp, vpp, zero_stage, cp, dp and dp_shard.
void read_mesh(const CsvTable& t, size_t r, RunRow& p) {
  SearchSpace& s = p.space;
  ParallelConfig& f = p.fallback;
  MeshColumns c{count(t, r, "tp"), count(t, r, "pp"), count(t, r, "cp"), count(t, r, "dp"),
                count(t, r, "model_parallel")};
  complete_mesh(c, p.num_gpus, p);
  read_knob(c.tp, "tp", s.tp, f.tp, 1, p);
  read_knob(c.pp, "pp", s.pp, f.pp, 1, p);
  read_knob(count(t, r, "vpp"), "vpp", s.vpp, f.vpp, 1, p);
  read_knob(read_zero_stage(t, r), "zero_stage", s.zero_stage, f.zero_stage, 1, p);
  check(p.num_gpus % (f.tp * f.pp) == 0 || !mesh_published(s), "tp {} x pp {} does not divide num_gpus {}", f.tp, f.pp,
        p.num_gpus);
  f.cp = read_cp(c, p.num_gpus, p);
  s.cp = {f.cp};
  check(f.cp >= 1 && p.num_gpus % (f.tp * f.cp * f.pp) == 0, "tp {} x cp {} x pp {} does not divide num_gpus {}", f.tp,
        f.cp, f.pp, p.num_gpus);
  f.dp = std::max(1, p.num_gpus / (f.tp * f.cp * f.pp));
  if (c.dp && mesh_published(s))
    check(int64_t(*c.dp) * f.tp * f.cp * f.pp == p.num_gpus, "dp {} x tp {} x cp {} x pp {} is not num_gpus {}", *c.dp,
          f.tp, f.cp, f.pp, p.num_gpus);
  // Where tp and pp are given they are the mesh; a model_parallel that is
  // not their product (a table's "model-parallel size" meaning TP alone) is
  // left unread and said, not a reason to drop the run.
  if (c.mp && mesh_published(s) && *c.mp != f.tp * f.pp)
    p.unread.push_back(fmt::format("model_parallel {} (not tp {} x pp {}: tp and pp taken)", *c.mp, f.tp, f.pp));
  // A mesh published as its data-parallel or model-parallel size (TP x PP,
  // Megatron's) alone, as Narayanan et al.'s Table 2 prints "model-parallel
  // size 96": the blank TP and PP are planned over the splits of the rest.
  if (!mesh_published(s)) {
    if (c.mp)
      check(p.num_gpus % (*c.mp * f.cp) == 0, "model_parallel {} x cp {} does not divide num_gpus {}", *c.mp, f.cp,
            p.num_gpus);
    if (c.dp) check(p.num_gpus % *c.dp == 0, "dp {} does not divide num_gpus {}", *c.dp, p.num_gpus);
    if (c.mp && c.dp)
      check(int64_t(*c.mp) * f.cp * *c.dp == p.num_gpus, "dp {} x model_parallel {} x cp {} is not num_gpus {}", *c.dp,
            *c.mp, f.cp, p.num_gpus);
    s.data_parallel = c.dp ? *c.dp : c.mp ? p.num_gpus / (*c.mp * f.cp) : 0;
  }
  // A blank dp_shard is ZeRO state sharded over the whole DP group (FSDP's
  // FULL_SHARD), unless the row names hybrid sharding (read_hybrid_shard); a
  // smaller one is hybrid sharding (validate() refuses one that does not
  // divide DP).
  const std::optional<int> given = count(t, r, "dp_shard");
  s.zero_shard = given ? std::vector<int>{*given} : read_hybrid_shard(t, r, p);
  if (s.zero_shard.empty()) s.zero_shard = {0};
  if (s.zero_shard.size() > 1) p.blanks.push_back("dp_shard");
  f.zero_shard = s.zero_shard.front();
}

// Column micro_batch, or grad_accum where the mesh is published.
void read_micro_batch(const CsvTable& t, size_t r, RunRow& p) {
  SearchSpace& s = p.space;
  ParallelConfig& f = p.fallback;
  if (auto mb = count(t, r, "micro_batch")) {
    s.micro_batch_size = {*mb};
    f.micro_batch_size = *mb;
  } else if (auto ga = count(t, r, "grad_accum"); ga && mesh_published(s)) {
    f.micro_batch_size = std::max(1, p.global_batch / (f.dp * *ga));
    s.micro_batch_size = {f.micro_batch_size};
  } else {
    p.blanks.push_back("micro_batch");
  }
}

// Columns recompute and recompute_num_layers. Recompute is none, selective
// or full; a yes or no (activation checkpointing on or off, as tables print
// it) is full or none.
void read_recompute(const CsvTable& t, size_t r, RunRow& p) {
  SearchSpace& s = p.space;
  ParallelConfig& f = p.fallback;
  const std::string rc = ascii_lower(without_note(trim(t.field(r, "recompute"))));
  if (rc.empty()) {
    p.blanks.push_back("recompute");
    f.recompute = Recompute::full;
    return;
  }
  static const std::pair<const char*, Recompute> names[] = {
      {"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full},
      {"yes", Recompute::full},  {"true", Recompute::full},           {"on", Recompute::full},
      {"no", Recompute::none},   {"false", Recompute::none},          {"off", Recompute::none}};
  const auto* hit = std::find_if(std::begin(names), std::end(names), [&](const auto& n) { return rc == n.first; });
  check(hit != std::end(names), "column recompute: '{}' is not none, selective, full, yes or no", rc);
  f.recompute = hit->second;
  s.recompute = {f.recompute};
  s.partial_recompute = false;
  if (auto k = count(t, r, "recompute_num_layers")) {
    check(f.recompute == Recompute::full, "column recompute_num_layers needs recompute full");
    f.recompute_method = RecomputeMethod::block;
    f.recompute_num_layers = *k;
    s.recompute_num_layers = *k;
  }
}

// A blank flash_attn where the framework column names a fused attention
// kernel (FlashAttention, PyTorch's SDPA, which runs it for 16-bit inputs)
// is yes: the column says what ran, where a profile's recipe would guess.
// Only the framework column: notes also say what did not run.
std::optional<bool> read_flash_attention(const CsvTable& t, size_t r, RunRow& p) {
  if (auto given = yes_no(t, r, "flash_attn")) return given;
  const std::string framework = ascii_lower(t.field(r, "framework"));
  for (const char* form : {"flashattention", "flash attention", "flash-attention", "flash_attn", "flash-attn"})
    p.flash_attention_named = p.flash_attention_named || framework.find(form) != std::string::npos;
  p.flash_attention_named = p.flash_attention_named || has_word(framework, "sdpa");
  if (!p.flash_attention_named) return std::nullopt;
  return true;
}

// Column precision: whether the GEMMs ran in 16 bits (bf16 or fp16, mixed
// precision as tables print it) or in fp32. FP8 and TF32 GEMMs are refused:
// the model prices neither, and reading either as 16-bit would be a silent
// error of tens of percent. Text naming neither width is read as a blank is
// (16-bit) and said as unread.
bool read_precision(const CsvTable& t, size_t r, RunRow& p) {
  const std::string text = trim(t.field(r, "precision")), v = ascii_lower(text);
  auto has = [&](const char* w) { return v.find(w) != std::string::npos; };
  // A format named only to say it did not run ("bf16, no FP8") names none.
  auto ran = [&](const char* w) {
    for (size_t at = v.find(w); at != std::string::npos; at = v.find(w, at + 1)) {
      const std::string before = v.substr(at >= 8 ? at - 8 : 0, at >= 8 ? 8 : at);
      if (before.find("no") == std::string::npos && before.find("without") == std::string::npos) return true;
    }
    return false;
  };
  check(!ran("fp8") && !ran("float8") && !ran("e4m3") && !ran("e5m2"),
        "column precision: '{}' names FP8 GEMMs, which the model does not price (bf16, fp16 and fp32 it does)", text);
  const bool sixteen = has("16") || has("half") || has("amp") || has("mixed");
  check(sixteen || !ran("tf32"), "column precision: '{}' names TF32 GEMMs, which the model does not price", text);
  if (sixteen || v.empty()) return true;
  if (has("fp32") || has("float32") || has("single")) return false;
  p.unread.push_back(fmt::format("precision '{}' (names no width: 16-bit, as a blank)", text));
  return true;
}

void read_knobs(const CsvTable& t, size_t r, RunRow& p) {
  SearchSpace& s = p.space;
  ParallelConfig& f = p.fallback;
  read_mesh(t, r, p);
  read_global_batch(t, r, p);
  f.global_batch_size = p.global_batch;
  read_micro_batch(t, r, p);
  read_recompute(t, r, p);
  read_knob(yes_no(t, r, "seq_parallel"), "seq_parallel", s.sequence_parallel, f.sequence_parallel, f.sequence_parallel,
            p);
  read_knob(read_flash_attention(t, r, p), "flash_attn", s.flash_attention, f.flash_attention, f.flash_attention, p);
  read_stage_split(t, r, p);
  s.bf16 = read_precision(t, r, p);
  f.bf16 = s.bf16;
  f.schedule = f.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
}

// A framework profile narrows the blanks to what the framework offered and
// sets its overlaps and ZeRO runtime; published knobs stay as published.
void apply_profile(const perf::FrameworkProfile& f, RunRow& p) {
  SearchSpace& s = p.space;
  if (s.recompute.empty() && f.recipe_recompute) s.recompute = {*f.recipe_recompute};
  if (s.flash_attention.empty() && f.recipe_flash_attention) s.flash_attention = {*f.recipe_flash_attention};
  const bool blank_counting = std::find(p.blanks.begin(), p.blanks.end(), "stage_counting") != p.blanks.end();
  if (blank_counting && f.recipe_stage_counting)
    s.stage_counting = p.fallback.stage_counting = p.widened.stage_counting = *f.recipe_stage_counting;
  restrict_to_framework(f, s, p.model);  // a blank knob is an open list
  s.framework = &f;  // and the plan keeps only what it runs (ZeRO-3 with a pipeline under Megatron's)
  p.fallback.stage_partition = s.stage_partition;
  p.options = f.options;
  if (!s.zero_stage.empty()) p.fallback.zero_stage = s.zero_stage.front();
  if (!s.flash_attention.empty()) p.fallback.flash_attention = s.flash_attention.front();
  if (!s.sequence_parallel.empty()) p.fallback.sequence_parallel = s.sequence_parallel.front() && p.fallback.tp > 1;
}

// The profile column, else the profile the framework text names; a name
// this build does not know (another tool's, e.g. "nemo-24") is read as
// framework text, then the framework column is, and the row is refused only
// when neither names a profile.
void read_profile(const CsvTable& t, size_t r, RunRow& p) {
  const std::string given = trim(t.field(r, "profile"));
  if (!given.empty() && perf::find_framework_profile(given)) {
    p.profile = given;
    return;
  }
  const std::string& precision = t.field(r, "precision");
  // The source's date, else its key's ("narayanan2021").
  const std::string source = t.field(r, "source") + " " + t.field(r, "source_key");
  if (!given.empty()) p.profile = perf::infer_profile(given, source, precision);
  if (p.profile.empty()) p.profile = perf::infer_profile(t.field(r, "framework"), source, precision);
  p.profile_inferred = !p.profile.empty();
  if (!given.empty() && p.profile.empty()) (void)perf::framework_profile(given);  // throws, naming the known ones
}

void read_options(const CsvTable& t, size_t r, RunRow& p) {
  p.widened = p.space;
  if (!p.profile.empty()) apply_profile(perf::framework_profile(p.profile), p);
  p.widened.stage_partition = p.space.stage_partition;  // how it splits layers, not a capability
  plan_unpublished_split(p);
  const std::string notes = t.field(r, "notes");
  auto has = [&](const char* flag) { return notes.find(flag) != std::string::npos; };
  p.options.overlap_grad_reduce |= has("--overlap-grad-reduce");
  p.options.overlap_param_gather |= has("--overlap-param-gather");
  p.options.tp_comm_overlap |= has("--tp-comm-overlap");
  p.options.overlap_p2p_comm |= has("--overlap-p2p-comm") || has("PP overlap default");
}

// Whether a published TFLOP/s counts hardware FLOPs: column tflops_kind
// ("hardware" or "model"), else what the row's profile publishes.
bool hardware_tflops(const CsvTable& t, size_t r, RunRow& p) {
  const std::string kind = ascii_lower(trim(t.field(r, "tflops_kind")));
  if (kind.empty()) {
    p.tflops_kind_inferred = !p.profile.empty() && perf::framework_profile(p.profile).hardware_tflops;
    return p.tflops_kind_inferred;
  }
  // As tables print it: "hardware (with recompute)", "model", "MFU".
  const bool hardware = kind.find("hardware") != std::string::npos || kind.find("hfu") != std::string::npos;
  const bool model = kind.find("model") != std::string::npos || kind.find("mfu") != std::string::npos;
  check(hardware != model, "column tflops_kind: '{}' is neither hardware nor model", kind);
  return hardware;
}

// The reported figure compared with the prediction, in order of preference.
void read_metric(const CsvTable& t, size_t r, RunRow& p) {
  const bool hardware = number(t, r, "tflops_per_gpu") && hardware_tflops(t, r, p);
  const std::pair<const char*, std::string> metrics[] = {
      {"tflops_per_gpu", hardware ? "hardware_tflops_per_gpu" : "model_tflops_per_gpu"},
      {"tokens_per_s_per_gpu", "tokens_per_s_per_gpu"},
      {"mfu_pct", "mfu_pct"},
      {"hfu_pct", "hfu_pct"},
      {"iter_time_s", "iter_time_s"},
      {"tokens_per_s", "tokens_per_s"}};
  for (const auto& [col, name] : metrics)
    if (auto x = number(t, r, col)) {
      check(*x > 0, "column {}: {} is not positive", col, *x);
      p.metric = name;
      p.reported = *x;
      return;
    }
}

// A size written with its unit at the start of `s` (lower case): "76 gb",
// "~82.4 gib (max reserved)"; GB, MB and TB decimal, GiB, MiB and TiB
// binary. Nullopt where the number or its unit is missing.
std::optional<double> size_with_unit(const std::string& s) {
  size_t at = s.find_first_not_of("~ ");
  if (at == std::string::npos) return std::nullopt;
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(s.substr(at), &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  at = s.find_first_not_of(' ', at + used);
  if (at == std::string::npos || !std::isfinite(x) || x <= 0) return std::nullopt;
  static const std::pair<const char*, double> units[] = {
      {"gib", 1073741824.0}, {"gb", 1e9}, {"mib", 1048576.0}, {"mb", 1e6}, {"tib", 1099511627776.0}, {"tb", 1e12}};
  for (const auto& [name, bytes] : units) {
    const size_t end = at + std::strlen(name);
    if (s.compare(at, std::strlen(name), name) == 0 && (end == s.size() || !std::isalnum(uint8_t(s[end]))))
      return x * bytes;
  }
  return std::nullopt;
}

// Column peak_mem: OOM, or a published peak such as "56 GB" or "82.4 GiB",
// read from the start of the field ("~76 GB (max reserved)" is 76 GB). A
// field that gives no size with its unit (a bare "76") is left unread, not
// guessed, and said in RunRow::unread: the row's throughput is still
// compared, and whether it fits is still checked.
void read_peak_memory(const CsvTable& t, size_t r, RunRow& p) {
  const std::string v = trim(t.field(r, "peak_mem"));
  if (v.empty()) return;
  const std::string low = ascii_lower(v);
  if (low.rfind("oom", 0) == 0 || low.rfind("out of memory", 0) == 0) {
    p.expected_oom = true;
    return;
  }
  if (const auto bytes = size_with_unit(low)) {
    p.reported_memory = *bytes;
    return;
  }
  p.unread.push_back(fmt::format("peak_mem '{}' (not OOM or a size such as 56 GB or 82.4 GiB)", v));
}

// The system column, refined or, where blank or unknown, inferred from the
// gpu and interconnect columns (perf::match_system).
void read_system(const CsvTable& t, size_t r, RunRow& p) {
  const std::string named = trim(t.field(r, "system"));
  const perf::SystemMatch m = perf::match_system(named, t.field(r, "gpu"), t.field(r, "interconnect"));
  if (m.name.empty()) {
    check(!named.empty(), "column system is blank and column gpu ('{}') names no device with a system file",
          trim(t.field(r, "gpu")));
    (void)perf::load_system_spec(named);  // throws, naming where it looked
  }
  p.system = m.name;
  p.system_from = m.from;
}

RunRow read_row(const CsvTable& t, size_t r) {
  RunRow p;
  p.line = t.row_lines[r];
  p.id = trim(t.field(r, "id"));
  check(!p.id.empty(), "column id is blank");
  read_system(t, r, p);
  p.source = trim(t.field(r, "source_key"));
  if (p.source.empty()) p.source = trim(t.field(r, "source"));
  read_profile(t, r, p);
  read_model(t, r, p.model, p);
  p.num_gpus = required_count(t, r, "num_gpus");
  read_knobs(t, r, p);
  read_options(t, r, p);
  read_metric(t, r, p);
  read_peak_memory(t, r, p);
  for (const char* col : kKeyColumns) p.key += trim(t.field(r, col)) + '\x1f';
  // What is inferred where the columns are blank, as resolved.
  p.key += fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f", p.profile, p.system, p.global_batch, p.model.vocab_size);
  const perf::PerfOptions& o = p.options;
  p.key += fmt::format("{}{}{}{}{}{}", int(o.overlap_grad_reduce), int(o.overlap_param_gather), int(o.tp_comm_overlap),
                       int(o.overlap_p2p_comm), p.hybrid_shard_inferred, int(p.flash_attention_named));
  return p;
}

}  // namespace

RunRows read_runs(const CsvTable& t) {
  // A column every run needs, missing from the header, is one error for the
  // table rather than one per row.
  for (const char* col : {"id", "layers", "hidden", "heads", "seq_len", "num_gpus"})
    check(t.column(col) >= 0,
          "the header has no column {} (every run needs id, layers, hidden, heads, seq_len and num_gpus)", col);
  RunRows out;
  out.skipped = t.errors;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    try {
      out.rows.push_back(read_row(t, r));
    } catch (const Error& e) {
      const std::string id = trim(t.field(r, "id"));
      out.skipped.push_back(fmt::format("{}line {}: {}", id.empty() ? "" : id + " ", t.row_lines[r], e.what()));
    }
  }
  return out;
}

}  // namespace meshtrain::tune
