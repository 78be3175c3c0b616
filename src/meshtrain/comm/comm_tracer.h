// The hook through which a timeline recorder sees every communication call.
// comm does not depend on the trace writer (measure/ depends on comm); the
// writer implements this interface and is attached to the communicators.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshtrain/comm/comm_stats.h"

namespace meshtrain {

// One completed call. Times are seconds on std::chrono::steady_clock since
// its epoch, the clock core/clock.h's now_s() reads.
struct CommEvent {
  CommOp op;
  std::string_view group;  // valid only during on_comm
  int group_size;
  int64_t bytes;     // as CommStats counts them
  double start_s;    // the call (or the post of a non-blocking form) began
  double end_s;      // the call returned (or its wait() did)
  double exposed_s;  // time the caller was blocked
  int peer;          // group rank of the other side of a send/recv or the
                     // root of a broadcast; -1 otherwise
};

class CommTracer {
 public:
  virtual ~CommTracer() = default;
  // Called on the calling thread after each recorded call completes.
  virtual void on_comm(const CommEvent& e) = 0;
};

}  // namespace meshtrain
