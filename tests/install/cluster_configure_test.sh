#!/bin/sh
# The cluster build: a plain CMake configure with tests and benchmarks off must
# not look for GoogleTest or Google Benchmark (they are made unfindable here),
# the default flags must not tune for the build machine (-march=native), and the
# CPU kernels (the only code that depends on the instruction set) must compile
# with those portable flags.
# Usage: cluster_configure_test.sh CMAKE SOURCE_DIR [COMPILER_LAUNCHER]
set -eu
cmake=$1 src=$2 launcher=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cmake" -S "$src" -B "$dir" -DMESHTRAIN_BUILD_TESTS=OFF -DMESHTRAIN_CUDA=OFF \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >"$dir/log" 2>&1 ||
  { cat "$dir/log"; echo "cluster_configure_test: configure failed without GoogleTest/Google Benchmark"; exit 1; }
test -f "$dir/CMakeFiles/mt_kernels.dir/flags.make" || { echo "cluster_configure_test: no compile flags generated"; exit 1; }
if grep -rq --include=flags.make -- '-march=native' "$dir"; then
  echo "cluster_configure_test: the default build compiles with -march=native"; exit 1
fi
if grep -q 'add_test' "$dir/CTestTestfile.cmake" 2>/dev/null; then
  echo "cluster_configure_test: tests registered although MESHTRAIN_BUILD_TESTS=OFF"; exit 1
fi
"$cmake" --build "$dir" --target mt_kernels -j2 >"$dir/build.log" 2>&1 ||
  { grep -m5 -B2 'error' "$dir/build.log"; echo "cluster_configure_test: the CPU kernels do not compile with the portable flags"; exit 1; }
echo "cluster_configure_test: configured without test dependencies, portable flags, CPU kernels compile"
