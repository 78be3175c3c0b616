#include "meshtrain/measure/trace.h"

#include "meshtrain/measure/gather.h"

#include <climits>

#include <fmt/format.h>

#include "meshtrain/comm/comm_error.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/measure/timer.h"

namespace meshtrain {

namespace {

std::string json_string(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

std::string args_of(const nlohmann::json& args) {
  if (args.is_null()) return {};
  MT_ASSERT(args.is_object());
  return args.dump();
}

void append_metadata(std::string& out, std::string_view what, int pid, int tid, std::string_view key,
                     const std::string& value) {
  if (!out.empty()) out += ",\n";
  out += fmt::format(R"({{"ph":"M","name":"{}","pid":{},"tid":{},"args":{{"{}":{}}}}})", what, pid, tid, key,
                     value);
}

}  // namespace

TraceWriter::TraceWriter(int rank, int stage, double origin_s)
    : rank_(rank), stage_(stage), origin_s_(origin_s) {}

void TraceWriter::complete(std::string_view name, std::string_view category, int pid, int tid, double ts_us,
                           double dur_us, const nlohmann::json& args) {
  events_.push_back(Event{'X', std::string(name), std::string(category), pid, tid, ts_us, dur_us, args_of(args)});
}

void TraceWriter::complete(std::string_view name, std::string_view category, double start_s, double end_s,
                           const nlohmann::json& args) {
  complete(name, category, stage_, rank_, to_us(start_s), (end_s - start_s) * 1e6, args);
}

void TraceWriter::begin(std::string_view name, std::string_view category) {
  open_.emplace_back(name);
  events_.push_back(Event{'B', std::string(name), std::string(category), stage_, rank_, to_us(now_s()), 0, {}});
}

void TraceWriter::end() {
  MT_ASSERT(!open_.empty());
  events_.push_back(Event{'E', std::move(open_.back()), {}, stage_, rank_, to_us(now_s()), 0, {}});
  open_.pop_back();
}

void TraceWriter::counter(std::string_view name, double at_s, const nlohmann::json& values) {
  events_.push_back(Event{'C', std::string(name), {}, stage_, rank_, to_us(at_s), 0, args_of(values)});
}

void TraceWriter::on_comm(const CommEvent& e) {
  events_.push_back(Event{'X', std::string(comm_op_name(e.op)), std::string(e.group), stage_,
                          kCommTidBase + rank_, to_us(e.start_s), (e.end_s - e.start_s) * 1e6,
                          fmt::format(R"({{"bytes":{},"exposed_us":{:.3f},"group_size":{},"peer":{}}})", e.bytes,
                                      e.exposed_s * 1e6, e.group_size, e.peer)});
}

std::string TraceWriter::events_json() const {
  std::string out;
  append_metadata(out, "process_name", stage_, rank_, "name", json_string(fmt::format("stage {}", stage_)));
  append_metadata(out, "process_sort_index", stage_, rank_, "sort_index", std::to_string(stage_));
  append_metadata(out, "thread_name", stage_, rank_, "name", json_string(fmt::format("rank {}", rank_)));
  append_metadata(out, "thread_sort_index", stage_, rank_, "sort_index", std::to_string(2 * rank_));
  append_metadata(out, "thread_name", stage_, kCommTidBase + rank_, "name",
                  json_string(fmt::format("rank {} comm", rank_)));
  append_metadata(out, "thread_sort_index", stage_, kCommTidBase + rank_, "sort_index",
                  std::to_string(2 * rank_ + 1));
  for (const Event& e : events_) {
    out += fmt::format(R"(,
{{"ph":"{}","name":{},"pid":{},"tid":{},"ts":{:.3f})", e.ph, json_string(e.name), e.pid, e.tid, e.ts_us);
    if (!e.category.empty()) out += fmt::format(R"(,"cat":{})", json_string(e.category));
    if (e.ph == 'X') out += fmt::format(R"(,"dur":{:.3f})", e.dur_us);
    if (!e.args.empty()) out += fmt::format(R"(,"args":{})", e.args);
    out += '}';
  }
  return out;
}

namespace {

std::string trace_file(const std::vector<std::string_view>& parts) {
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  for (std::string_view p : parts) {
    if (p.empty()) continue;
    if (!first) out += ",\n";
    out += p;
    first = false;
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

}  // namespace

void TraceWriter::write(const std::string& path) const {
  const std::string mine = events_json();
  write_output_file(path, {trace_file({mine})}, "trace");
}

void TraceWriter::gather_and_write(const Communicator& world, const std::string& path) const {
  const std::vector<std::string> all = gather_strings(world, events_json());
  if (world.rank() != 0) return;
  write_output_file(path, {trace_file(std::vector<std::string_view>(all.begin(), all.end()))}, "trace");
}

double synchronized_origin_s(const Communicator& world) {
  check_mpi(MPI_Barrier(world.raw()), "MPI_Barrier", world.name());
  return now_s();
}

}  // namespace meshtrain
