// The directory protocol of checkpoints, crash-safe at every moment:
//
//   DIR/iter_0000010.tmp/   staged: every rank writes and fsyncs its shard
//                           file, rank 0 the metadata, then fsyncs the folder
//   DIR/iter_0000010/       renamed into place (rename(2) is atomic), DIR fsynced
//   DIR/latest              "iter_0000010", replaced atomically, DIR fsynced
//
// A crash before the rename leaves only a stale *.tmp folder (removed by the
// next save of that iteration, never loaded); a crash before `latest` is
// replaced leaves it naming the previous complete checkpoint. Pruning
// (--keep-last) removes the oldest complete folders after `latest` moved.
// Ranks are assumed to share DIR (one file system, as on a cluster's
// parallel file system).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::checkpoint {

std::string iteration_dir_name(int iteration);  // "iter_0000010"

// Rank 0: creates DIR and a fresh DIR/<name>.tmp (removing a stale one);
// returns its path. Throws Error on failure.
std::string stage_dir(const std::string& dir, const std::string& name);

// Writes `parts` to `path` (a new file in a staging folder) and fsyncs it.
// Throws Error "cannot write <path>: <reason>" (ENOSPC: disk full); the
// caller discards the staging folder.
void write_durably(const std::string& path, const std::vector<std::string_view>& parts);

// Rank 0: fsyncs `staged`, renames it to DIR/<name>, fsyncs DIR, points
// DIR/latest at <name> and keeps the `keep_last` newest iter_* folders (0:
// all). Returns the final path.
std::string commit_dir(const std::string& dir, const std::string& staged, const std::string& name, int keep_last);

// Removes a staging folder (after a failed save); never throws.
void discard_dir(const std::string& staged);

// The checkpoint folder `path` names: DIR/<latest> when DIR/latest exists,
// else `path` itself when it holds metadata.json. Throws Error otherwise.
std::string resolve_checkpoint(const std::string& path);

}  // namespace meshtrain::checkpoint
