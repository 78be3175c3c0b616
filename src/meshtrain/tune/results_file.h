// The results file of `meshtrain tune --results FILE`: JSON lines, one
// Trial a line (trial.h), appended and flushed to disk as each trial ends,
// so a killed tune loses at most the trial in flight. Reading skips a last
// line cut short by a kill (it has no newline); any other malformed line is
// an Error naming the file and line.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/tune/trial.h"

namespace meshtrain::tune {

// Every trial of the file, in order; none when it does not exist.
std::vector<Trial> read_results(const std::string& path);

// Cuts a last line left without its newline by a kill, so that appending
// continues the file cleanly. Returns whether it cut anything.
bool drop_partial_line(const std::string& path);

// Appends one line (O_APPEND, then fsync). Throws Error when it cannot.
void append_result(const std::string& path, const Trial& t);

}  // namespace meshtrain::tune
