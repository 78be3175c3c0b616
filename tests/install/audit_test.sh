#!/bin/sh
# scripts/audit-deps passes on this build and fails, naming the package, when
# a package the build uses is taken out of scripts/install-deps' list.
# Usage: audit_test.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
if ! command -v dpkg-query >/dev/null 2>&1; then echo "audit_test: no dpkg, skipped"; exit 0; fi
"$src/scripts/audit-deps" "$build" || { echo "audit_test: the audit fails on the build as it is"; exit 1; }
out=$("$src/scripts/audit-deps" --without ocl-icd-opencl-dev "$build" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "audit_test: expected exit 1 without ocl-icd-opencl-dev, got $rc"; exit 1; }
echo "$out" | grep -q '^  ocl-icd-opencl-dev ' || { echo "audit_test: the missing package is not named"; exit 1; }
echo "audit_test: the audit names a package left out of the list"
