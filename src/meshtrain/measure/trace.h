// TraceWriter: a timeline of one rank's work in Chrome Trace Event JSON, the
// format chrome://tracing and Perfetto open. Each rank records its events in
// memory; gather_and_write collects every rank's events on rank 0, which
// writes one file
//   {"traceEvents":[...], "displayTimeUnit":"ms"}
// atomically (a temporary file renamed into place).
//
// Tracks: process (pid) = pipeline stage, named "stage S"; thread (tid) =
// world rank, named "rank R", for compute spans; communication calls go to a
// second thread of the same process, tid kCommTidBase + R, named
// "rank R comm", since non-blocking calls overlap the compute spans.
// Timestamps are microseconds from the writer's origin (steady-clock
// seconds; see core/clock.h).
//
// Attached to communicators (Communicator::set_tracer,
// ProcessMesh::set_tracer), it records every call as a complete span: name =
// operation, category = group, args = {bytes, exposed_us, group_size, peer}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/comm_tracer.h"
#include "meshtrain/comm/communicator.h"

namespace meshtrain {

class TraceWriter : public CommTracer {
 public:
  static constexpr int kCommTidBase = 1 << 20;

  // Events of world rank `rank` on pipeline stage `stage`; timestamps count
  // from `origin_s` (steady-clock seconds). 0 keeps the raw clock, which lines
  // ranks of one host up exactly; synchronized_origin_s() gives a zero shared
  // across hosts.
  TraceWriter(int rank, int stage, double origin_s = 0.0);

  int rank() const { return rank_; }
  int stage() const { return stage_; }
  double origin_s() const { return origin_s_; }

  // A complete ("X") span on any track, in microseconds from the origin.
  void complete(std::string_view name, std::string_view category, int pid, int tid, double ts_us,
                double dur_us, const nlohmann::json& args = nlohmann::json());
  // A complete span on this rank's compute track, in steady-clock seconds.
  void complete(std::string_view name, std::string_view category, double start_s, double end_s,
                const nlohmann::json& args = nlohmann::json());
  // Duration events ("B"/"E") on this rank's compute track, at now_s();
  // end() closes the innermost open begin().
  void begin(std::string_view name, std::string_view category);
  void end();
  // A counter ("C") sample on this rank's process, e.g. memory in use:
  // values is an object of named numbers.
  void counter(std::string_view name, double at_s, const nlohmann::json& values);

  // CommTracer: one span per communication call on the comm track.
  void on_comm(const CommEvent& e) override;

  size_t num_events() const { return events_.size(); }
  void clear() { events_.clear(); }

  // This rank's metadata and events as JSON objects joined by ",\n" (no
  // brackets), ready to be spliced into a traceEvents array.
  std::string events_json() const;
  // Writes this rank's events alone as a complete trace file.
  void write(const std::string& path) const;
  // Collective over `world`: gathers every rank's events (MPI_Gatherv) and
  // rank 0 writes them as one file. Throws Error on rank 0 if the file cannot
  // be written. The gather is not counted in the communicator's statistics.
  void gather_and_write(const Communicator& world, const std::string& path) const;

 private:
  struct Event {
    char ph;
    std::string name;
    std::string category;
    int pid, tid;
    double ts_us, dur_us;
    std::string args;  // serialised JSON object, or empty
  };
  double to_us(double t_s) const { return (t_s - origin_s_) * 1e6; }

  int rank_;
  int stage_;
  double origin_s_;
  std::vector<Event> events_;
  std::vector<std::string> open_;  // names of begin() spans not yet ended
};

// Collective over `world`: a barrier, then now_s(). Ranks leave a barrier at
// nearly the same moment, so this is a time origin they share.
double synchronized_origin_s(const Communicator& world);

}  // namespace meshtrain
