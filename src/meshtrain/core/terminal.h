// Terminal: whether to draw live output (progress bars, carriage returns) on
// stdout. Live output goes only to a person at a terminal; logs get plain lines.
//
// Under an MPI launcher a rank's stdout is a pseudo-terminal that the launcher
// forwards wherever its own stdout goes (Open MPI does this even when mpirun's
// output is redirected to a file), so isatty() cannot tell: under a launcher
// the automatic choice is plain lines, and `on` forces the bar.
#pragma once

namespace meshtrain {

enum class LiveOutput { automatic, on, off };

// True when live output should be drawn on stdout in this process.
bool live_output_enabled(LiveOutput mode);

}  // namespace meshtrain
