// The tuning loop in process: strategies, repeats, resume from the results
// file, replay of recorded measurements, calibration.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "meshtrain/core/error.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/model_check.h"
#include "meshtrain/tune/refit.h"
#include "meshtrain/tune/results_file.h"
#include "meshtrain/tune/tuner.h"

namespace meshtrain::tune {
namespace {

using data::testing::TempDir;

// tiny on 4 ranks: tp 1,2 x pp 1,2 x zero 0,1 x mbs 1,2 = 16 layouts.
TuneSpace tiny_space(const perf::SystemSpec* sys = nullptr) {
  SearchSpace s;
  s.tp = {1, 2};
  s.pp = {1, 2};
  s.vpp = {1};
  s.zero_stage = {0, 1};
  s.micro_batch_size = {1, 2};
  s.recompute = {Recompute::none};
  s.sequence_parallel = {false};
  s.flash_attention = {true};
  s.bf16 = false;
  s.partial_recompute = false;
  return make_tune_space(load_model_config("tiny"), s, 4, 8, sys);
}

// Answers from a function of the layout and counts the calls per layout.
class FakeSource : public TrialSource {
 public:
  std::map<std::string, int> calls;
  std::function<double(const ParallelConfig&)> value = [](const ParallelConfig& p) {
    return 1000.0 * p.tp + 100 * p.pp + 10 * p.micro_batch_size + p.zero_stage;
  };
  Trial run(const TunePoint& p) override {
    ++calls[p.key];
    Trial t;
    t.config = p.config;
    t.key = p.key;
    t.status = "ok";
    t.tokens_per_s = value(p.config);
    return t;
  }
};

TEST(Tuner, SpaceHoldsEveryValidLayoutOnce) {
  const TuneSpace s = tiny_space();
  EXPECT_EQ(s.points.size(), 16u);
  std::set<std::string> keys;
  for (const TunePoint& p : s.points) keys.insert(p.key);
  EXPECT_EQ(keys.size(), 16u);
}

// Hybrid sharding as a searched knob (tune --data-parallel-shard-size 0,2):
// ZeRO-1 over DP 4 and over blocks of 2, told apart by their keys and by a
// feature of their own that layouts without it leave at 0.
TEST(Tuner, SpaceSearchesHybridShardGroupsWhereGiven) {
  SearchSpace s;
  s.tp = {1};
  s.pp = {1};
  s.vpp = {1};
  s.zero_stage = {0, 1};
  s.zero_shard = {0, 2};
  s.micro_batch_size = {1};
  s.recompute = {Recompute::none};
  s.sequence_parallel = {false};
  s.flash_attention = {true};
  s.partial_recompute = false;
  const TuneSpace t = make_tune_space(load_model_config("tiny"), s, 4, 8, nullptr);
  ASSERT_EQ(t.points.size(), 3u);  // ZeRO-0, ZeRO-1, ZeRO-1 over blocks of 2
  int hybrid = 0;
  for (const TunePoint& p : t.points) {
    hybrid += p.config.hybrid_shard();
    EXPECT_EQ(p.features(7), p.config.hybrid_shard() ? 1.0 : 0.0) << p.key;
  }
  EXPECT_EQ(hybrid, 1);
  EXPECT_NE(t.find("tp=1 pp=1 vpp=1 dp=4 zero=1 mbs=1 recompute=none sp=off flash=on shard=2"), -1);
}

TEST(Tuner, GridRunsTheSpaceInOrderAndFindsTheBest) {
  const TuneSpace s = tiny_space();
  FakeSource src;
  TuneOptions o;
  o.strategy = "grid";
  o.budget_trials = 100;
  o.repeat_band = 0;
  const TuneOutcome r = run_tune(s, src, o);
  ASSERT_EQ(r.trials.size(), 16u);  // stops when the space is exhausted
  for (size_t i = 0; i < r.trials.size(); ++i) EXPECT_EQ(r.trials[i].key, s.points[i].key);
  EXPECT_EQ(s.points[r.best].config.tp, 2);
  EXPECT_EQ(s.points[r.best].config.pp, 2);
  EXPECT_DOUBLE_EQ(r.best_tokens_per_s, 2221);
}

TEST(Tuner, RandomAndBoNeverRepeatALayoutUnasked) {
  const TuneSpace s = tiny_space();
  for (const char* name : {"random", "bo"}) {
    FakeSource src;
    TuneOptions o;
    o.strategy = name;
    o.budget_trials = 12;
    o.repeat_band = 0;
    o.seed = 7;
    const TuneOutcome r = run_tune(s, src, o);
    EXPECT_EQ(r.trials.size(), 12u) << name;
    for (const auto& [k, n] : src.calls) EXPECT_EQ(n, 1) << name << " " << k;
  }
}

TEST(Tuner, BoFindsTheBestOfASmoothSpaceBeforeRandomDoesOnAverage) {
  const TuneSpace s = tiny_space();
  double bo = 0, rnd = 0;
  for (int seed = 1; seed <= 10; ++seed)
    for (const char* name : {"random", "bo"}) {
      FakeSource src;
      TuneOptions o;
      o.strategy = name;
      o.budget_trials = 5;
      o.repeat_band = 0;
      o.seed = seed;
      (std::string(name) == "bo" ? bo : rnd) += run_tune(s, src, o).best_tokens_per_s;
    }
  EXPECT_GT(bo, rnd);
}

TEST(Tuner, ModelStartsFromTheBestPredictionAndSkipsWhatDoesNotFit) {
  perf::SystemSpec sys = perf::load_system_spec("local");
  const TuneSpace s = tiny_space(&sys);
  int best = 0;
  for (size_t i = 0; i < s.points.size(); ++i)
    if (s.points[i].predicted_tokens_per_s > s.points[best].predicted_tokens_per_s) best = int(i);
  FakeSource src;
  TuneOptions o;
  o.strategy = "model";
  o.budget_trials = 1;
  EXPECT_EQ(run_tune(s, src, o).trials.at(0).key, s.points[best].key);

  TuneSpace t = s;
  for (TunePoint& p : t.points) p.predicted_fits = p.config.tp == 1;
  FakeSource src2;
  o.budget_trials = 16;
  o.repeat_band = 0;
  const TuneOutcome r = run_tune(t, src2, o);
  EXPECT_EQ(r.trials.size(), 8u);  // only the tp = 1 half
  for (const Trial& tr : r.trials) EXPECT_EQ(tr.config.tp, 1);
}

TEST(Tuner, ModelRefusesASpaceWithoutPredictions) {
  FakeSource src;
  TuneOptions o;
  o.strategy = "model";
  EXPECT_THROW(run_tune(tiny_space(), src, o), Error);
}

// Four grid trials of the tiny space with a 3% repeat band.
TuneOutcome four_grid_trials(std::function<double(const ParallelConfig&)> value) {
  FakeSource src;
  src.value = std::move(value);
  TuneOptions o;
  o.strategy = "grid";
  o.budget_trials = 4;
  o.repeat_band = 0.03;
  return run_tune(tiny_space(), src, o);
}

TEST(Tuner, ATrialCloseToAnotherBestIsMeasuredAgain) {
  const TuneOutcome r = four_grid_trials([](const ParallelConfig& p) { return p.zero_stage == 1 ? 1010.0 : 1000.0; });
  // 1st: first measurement, nothing to compare; 2nd within 1% of the 1st:
  // repeated as the 3rd; the 4th is new and within 3% again.
  ASSERT_EQ(r.trials.size(), 4u);
  EXPECT_NE(r.trials[0].key, r.trials[1].key);
  EXPECT_EQ(r.trials[2].key, r.trials[1].key);
  EXPECT_EQ(r.trials[2].strategy, "grid (repeat)");
  EXPECT_EQ(r.best_measurements, 2);
}

// A first trial far above the best so far (a new best by 50%) is measured
// again before it is believed; one far below is not.
TEST(Tuner, ANewBestIsMeasuredAgain) {
  const TuneOutcome r = four_grid_trials(
      [](const ParallelConfig& p) { return p.zero_stage == 1 ? 1500.0 : p.micro_batch_size == 2 ? 500.0 : 1000.0; });
  ASSERT_EQ(r.trials.size(), 4u);
  std::vector<double> v;
  for (const Trial& t : r.trials) v.push_back(t.tokens_per_s);
  // Grid order: mbs 1 zero 0 (1000), mbs 1 zero 1 (1500: a new best,
  // repeated), mbs 2 zero 0 (500: far below, not repeated).
  EXPECT_EQ(v, (std::vector<double>{1000, 1500, 1500, 500}));
  EXPECT_EQ(r.trials[2].strategy, "grid (repeat)");
  EXPECT_EQ(r.trials[3].strategy, "grid");
}

TEST(Tuner, ResumeRunsNoFinishedTrialAgainAndLosesNone) {
  TempDir d;
  const std::string results = d.file("r.jsonl");
  const TuneSpace s = tiny_space();
  TuneOptions o;
  o.strategy = "random";
  o.seed = 3;
  o.repeat_band = 0;
  o.results = results;
  o.budget_trials = 5;
  FakeSource first;
  run_tune(s, first, o);
  // A kill in the middle of writing the 6th record.
  { std::ofstream(results, std::ios::app) << R"({"key": "tp=1 pp=1)"; }
  o.budget_trials = 9;
  FakeSource second;
  const TuneOutcome r = run_tune(s, second, o);
  EXPECT_EQ(r.resumed, 5);
  ASSERT_EQ(r.trials.size(), 9u);
  int ran = 0;
  for (const auto& [k, n] : second.calls) {
    EXPECT_EQ(first.calls.count(k), 0u) << k << " ran again";
    ran += n;
  }
  EXPECT_EQ(ran, 4);
  const std::vector<Trial> file = read_results(results);
  ASSERT_EQ(file.size(), 9u);
  std::set<std::string> keys;
  for (const Trial& t : file) keys.insert(t.key);
  EXPECT_EQ(keys.size(), 9u);
}

TEST(Tuner, ResultsFileRejectsAMalformedLineInTheMiddle) {
  TempDir d;
  data::testing::write_text(d.file("r.jsonl"), "{\"not\": \"a trial\"}\n");
  EXPECT_THROW(read_results(d.file("r.jsonl")), Error);
  EXPECT_TRUE(read_results(d.file("absent.jsonl")).empty());
}

TEST(Tuner, ReplayAnswersWithRecordedFiguresAndTheirMedianIsTheTruth) {
  TempDir d;
  const TuneSpace s = tiny_space();
  const TunePoint& p = s.points[3];
  for (double v : {100.0, 130.0, 90.0}) {
    Trial t;
    t.config = p.config;
    t.key = p.key;
    t.status = "ok";
    t.tokens_per_s = v;
    append_result(d.file("gt.jsonl"), t);
  }
  ReplayTrials replay({d.file("gt.jsonl")}, 5, 8);
  EXPECT_DOUBLE_EQ(replay.truth(p.key), 100.0);
  EXPECT_NEAR(replay.spread(p.key), 0.4, 1e-12);
  std::set<double> seen;
  for (int i = 0; i < 40; ++i) seen.insert(replay.run(p).tokens_per_s);
  EXPECT_EQ(seen, (std::set<double>{90.0, 100.0, 130.0}));
  EXPECT_THROW(replay.run(s.points[0]), Error);  // never measured
}

TEST(Tuner, CalibrationRecoversScaledEfficiencies) {
  const ModelConfig m = load_model_config("tiny");
  const perf::SystemSpec base = perf::load_system_spec("local");
  Factors scales = kUnitFactors;
  scales[int(Factor::matmul)] = 0.5;
  scales[int(Factor::comm_bandwidth)] = 0.3;
  scales[int(Factor::comm_latency)] = 4.0;
  const perf::SystemSpec truth = scale_system(base, scales);
  const TuneSpace s = tiny_space(&base);
  std::vector<Trial> trials;
  for (const TunePoint& p : s.points) {
    Trial t;
    t.config = p.config;
    t.key = p.key;
    t.status = "ok";
    t.tokens_per_s = perf::predict(m, p.config, truth, 4).tokens_per_s;
    trials.push_back(t);
  }
  const Refit r = refit_system(m, base, 4, trials);
  EXPECT_GT(r.rms_log_error_before, 0.1);
  EXPECT_LT(r.rms_log_error_after, 0.1 * r.rms_log_error_before);
  EXPECT_NEAR(std::log(r.factors[int(Factor::matmul)]), std::log(0.5), 0.15);
  // Efficiencies never leave (0, 1]: the written file loads.
  for (double f : {0.01, 50.0}) {
    Factors big = kUnitFactors;
    big[int(Factor::comm_bandwidth)] = big[int(Factor::matmul)] = f;
    EXPECT_NO_THROW(scale_system(base, big).validate());
  }
}

// Cross-validation scores each layout with a refit that never saw it: on
// throughputs the scaled model produces exactly, the out-of-fold predictions
// keep the order (Spearman 1) and are close; a fold count outside 2 .. the
// layouts is refused.
TEST(Tuner, CrossValidationPredictsHeldOutLayouts) {
  const ModelConfig m = load_model_config("tiny");
  const perf::SystemSpec base = perf::load_system_spec("local");
  Factors scales = kUnitFactors;
  scales[int(Factor::matmul)] = 0.4;
  const perf::SystemSpec truth = scale_system(base, scales);
  const TuneSpace s = tiny_space(&base);
  std::vector<Measured> layouts;
  for (const TunePoint& p : s.points) layouts.push_back({p.config, p.key, perf::predict(m, p.config, truth, 4).tokens_per_s});
  const ModelCheck plain = check_model(m, base, 4, layouts);
  EXPECT_GT(plain.rms_log_error, 0.05);
  const ModelCheck cv = cross_validate(m, base, 4, layouts, 2);
  ASSERT_EQ(cv.rows.size(), layouts.size());
  ASSERT_EQ(cv.fold_factors.size(), 2u);
  for (const auto& r : cv.rows) EXPECT_TRUE(r.fold == 0 || r.fold == 1);
  EXPECT_LT(cv.rms_log_error, 0.05);
  EXPECT_GT(cv.spearman, 0.95);
  EXPECT_THROW(cross_validate(m, base, 4, layouts, 1), Error);
  EXPECT_THROW(cross_validate(m, base, 4, layouts, int(layouts.size()) + 1), Error);
}

}  // namespace
}  // namespace meshtrain::tune
