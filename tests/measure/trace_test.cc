#include "meshtrain/measure/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"

namespace meshtrain {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() /
                     ("meshtrain_trace_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                      "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// The events of `trace` with phase `ph` and name `name`.
std::vector<nlohmann::json> events(const nlohmann::json& trace, std::string_view ph, std::string_view name) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph && e["name"] == name) out.push_back(e);
  return out;
}

TEST(Trace, FileHasChromeTraceStructure) {
  const fs::path dir = temp_dir();
  TraceWriter w(/*rank=*/3, /*stage=*/1, /*origin_s=*/100.0);
  w.complete("forward", "compute", 100.5, 100.75, {{"micro_batch", 2}});
  w.complete("raw", "misc", 7, 9, 12.5, 3.25);
  w.begin("step", "train");
  w.begin("backward \"quoted\"", "compute");
  w.end();
  w.end();
  w.counter("memory", 101.0, {{"activations", 1024}});
  w.on_comm(CommEvent{CommOp::all_reduce, "tp", 2, 4096, 100.25, 100.5, 0.125, -1});
  EXPECT_EQ(w.num_events(), 8u);

  const fs::path path = dir / "trace.json";
  w.write(path.string());
  const nlohmann::json t = read_json(path);
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  ASSERT_TRUE(t["traceEvents"].is_array());
  for (const auto& e : t["traceEvents"]) {
    SCOPED_TRACE(e.dump());
    ASSERT_TRUE(e.contains("ph"));
    ASSERT_TRUE(e.contains("name"));
    ASSERT_TRUE(e.contains("pid"));
    ASSERT_TRUE(e.contains("tid"));
    if (e["ph"] != "M") {
      ASSERT_TRUE(e.contains("ts"));
    }
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("dur"));
    }
  }

  const auto fwd = events(t, "X", "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0]["cat"], "compute");
  EXPECT_EQ(fwd[0]["pid"], 1);
  EXPECT_EQ(fwd[0]["tid"], 3);
  EXPECT_DOUBLE_EQ(fwd[0]["ts"].get<double>(), 500000.0);
  EXPECT_DOUBLE_EQ(fwd[0]["dur"].get<double>(), 250000.0);
  EXPECT_EQ(fwd[0]["args"]["micro_batch"], 2);

  const auto raw = events(t, "X", "raw");
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0]["pid"], 7);
  EXPECT_EQ(raw[0]["tid"], 9);
  EXPECT_DOUBLE_EQ(raw[0]["ts"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(raw[0]["dur"].get<double>(), 3.25);

  ASSERT_EQ(events(t, "B", "step").size(), 1u);
  ASSERT_EQ(events(t, "B", "backward \"quoted\"").size(), 1u);
  ASSERT_EQ(events(t, "E", "backward \"quoted\"").size(), 1u);
  ASSERT_EQ(events(t, "E", "step").size(), 1u);
  EXPECT_LE(events(t, "B", "step")[0]["ts"].get<double>(), events(t, "E", "step")[0]["ts"].get<double>());

  const auto mem = events(t, "C", "memory");
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_EQ(mem[0]["args"]["activations"], 1024);

  const auto comm = events(t, "X", "all_reduce");
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(comm[0]["cat"], "tp");
  EXPECT_EQ(comm[0]["pid"], 1);
  EXPECT_EQ(comm[0]["tid"], TraceWriter::kCommTidBase + 3);
  EXPECT_DOUBLE_EQ(comm[0]["ts"].get<double>(), 250000.0);
  EXPECT_DOUBLE_EQ(comm[0]["dur"].get<double>(), 250000.0);
  EXPECT_EQ(comm[0]["args"]["bytes"], 4096);
  EXPECT_DOUBLE_EQ(comm[0]["args"]["exposed_us"].get<double>(), 125000.0);
  EXPECT_EQ(comm[0]["args"]["group_size"], 2);

  const auto pname = events(t, "M", "process_name");
  ASSERT_EQ(pname.size(), 1u);
  EXPECT_EQ(pname[0]["pid"], 1);
  EXPECT_EQ(pname[0]["args"]["name"], "stage 1");
  const auto tname = events(t, "M", "thread_name");
  ASSERT_EQ(tname.size(), 2u);
  EXPECT_EQ(tname[0]["tid"], 3);
  EXPECT_EQ(tname[0]["args"]["name"], "rank 3");
  EXPECT_EQ(tname[1]["tid"], TraceWriter::kCommTidBase + 3);
  EXPECT_EQ(tname[1]["args"]["name"], "rank 3 comm");
  fs::remove_all(dir);
}

TEST(Trace, EmptyWriterStillWritesValidFile) {
  const fs::path dir = temp_dir();
  TraceWriter w(0, 0);
  w.write((dir / "empty.json").string());
  const nlohmann::json t = read_json(dir / "empty.json");
  EXPECT_EQ(events(t, "M", "thread_name").size(), 2u);
  fs::remove_all(dir);
}

TEST(Trace, EndWithoutBeginIsABug) {
  TraceWriter w(0, 0);
  EXPECT_THROW(w.end(), std::logic_error);
}

}  // namespace
}  // namespace meshtrain
