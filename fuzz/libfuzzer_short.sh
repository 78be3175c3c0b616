#!/bin/sh
# Usage: libfuzzer_short.sh FUZZ_BINARY CORPUS_DIR REGRESSIONS_DIR
# A short seeded libFuzzer run (ctest): every committed seed and regression
# input, then FUZZ_RUNS (default 3000) mutations with a fixed seed, at most
# 20 s. New inputs go to a temporary folder (never into the repository);
# a finding fails the test and is printed with the path of its input.
# Exit 77 (ctest: skipped) when the binary was not built, saying why.
bin=$1
corpus=$2
regressions=$3
if [ ! -x "$bin" ]; then
  if ! command -v clang++ >/dev/null 2>&1; then why="clang++ is not installed"
  elif ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    why="libFuzzer (libfuzzer-14-dev) is not installed"
  else why="$bin was not built (make test builds it; or make fuzz)"
  fi
  echo "SKIPPED: no libFuzzer target: $why; scripts/install-deps --fuzz installs clang and libFuzzer"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/new"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$bin" -seed=20261201 -runs="${FUZZ_RUNS:-3000}" -max_total_time=20 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$work/" "$work/new" "$corpus" "$regressions" >"$work/log" 2>&1
rc=$?
tail -n 25 "$work/log"
if [ $rc -ne 0 ]; then
  for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -f "$f" ] || continue
    echo "finding: $(basename "$f"), base64 (decode into $regressions/):"
    base64 "$f"
  done
  exit 1
fi
exit 0
