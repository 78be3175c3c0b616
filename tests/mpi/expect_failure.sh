#!/bin/sh
# Usage: expect_failure.sh LIMIT_S PATTERN COMMAND...
# Passes iff COMMAND exits non-zero within LIMIT_S seconds and its output
# (stdout and stderr) matches the extended regular expression PATTERN.
# (mpirun itself exits 137 when a rank died of SIGKILL, so a time-out is told
# apart by the time taken, not by the status.)
limit=$1
pattern=$2
shift 2
log=$(mktemp)
start=$(date +%s)
timeout -k 5 "$limit" "$@" >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$log"
echo "expect_failure: exit status $rc after ${elapsed} s"
status=0
if [ "$rc" -eq 0 ]; then
  echo "expect_failure: FAIL: the command succeeded; it should have failed"
  status=1
elif [ "$elapsed" -ge "$limit" ]; then
  echo "expect_failure: FAIL: the command was still running after ${limit} s"
  status=1
elif ! grep -Eq "$pattern" "$log"; then
  echo "expect_failure: FAIL: the output does not match: $pattern"
  status=1
elif [ -n "$EXPECT_ABSENT" ] && grep -Eq "$EXPECT_ABSENT" "$log"; then
  echo "expect_failure: FAIL: the output matches: $EXPECT_ABSENT"
  status=1
fi
rm -f "$log"
exit $status
