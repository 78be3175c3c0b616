// The checks a multi-rank command makes before it starts: every rank runs
// them, and every rank learns whether any rank failed, so that none is left
// waiting in a collective (ranks reading node-local files may disagree).
#pragma once

#include <functional>

namespace meshtrain::cli {

// Runs `step` on every rank of MPI_COMM_WORLD (collective). When it throws on
// any rank, the lowest such rank prints "meshtrain <command>: error: <what>"
// and every rank gets false.
bool agreed(const char* command, const std::function<void()>& step);

}  // namespace meshtrain::cli
