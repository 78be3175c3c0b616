#!/bin/sh
# A stand-in for `mpirun ... meshtrain train ...` in the tune tests: called
# with the trial's command line, it writes a run report whose tokens/s
# follow from the layout (1000 tp + 100 pp + 10 mbs + zero), after
# FAKE_SLEEP seconds. It appends one line per call to FAKE_LOG and its pid
# to FAKE_PIDS. With FAKE_OOM_TP=N, layouts with that TP fail the way an
# allocation failure does.
report= tp=1 pp=1 mbs=1 zero=0
while [ $# -gt 0 ]; do
  case "$1" in
    --report) report=$2; shift ;;
    --tensor-model-parallel-size) tp=$2; shift ;;
    --pipeline-model-parallel-size) pp=$2; shift ;;
    --micro-batch-size) mbs=$2; shift ;;
    --zero-stage) zero=$2; shift ;;
  esac
  shift
done
echo "tp=$tp pp=$pp mbs=$mbs zero=$zero" >> "${FAKE_LOG:-/dev/null}"
echo $$ >> "${FAKE_PIDS:-/dev/null}"
sleep "${FAKE_SLEEP:-0}"
if [ "${FAKE_OOM_TP:-0}" = "$tp" ]; then
  echo "meshtrain: error: out of memory: cannot allocate 1.5 GiB of activations" >&2
  exit 2
fi
tps=$((1000 * tp + 100 * pp + 10 * mbs + zero))
cat > "$report" <<JSON
{"tokens_per_s": $tps, "memory_peak_bytes": {"total": 1048576},
 "measurements": {"aggregate": {"tokens_per_s": {"median": $tps}}}}
JSON
