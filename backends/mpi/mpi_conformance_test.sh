#!/usr/bin/env bash
# The conformance suite on the MPI backend: `mpirun -np N` of the suite's binary for N = 1..4,
# each rank one process running the cases of its world size (--gtest_filter '*/wN_*'). Passes
# when every run exits 0 and every rank of it reports passed cases.
set -u
ranks="$TEST_SRCDIR/shardkit/backends/mpi/mpi_conformance_ranks"
out="$TEST_TMPDIR/out"
# Each rank would write Bazel's XML_OUTPUT_FILE; Bazel writes the test's own instead.
unset XML_OUTPUT_FILE GTEST_OUTPUT
export TMPDIR="$TEST_TMPDIR"  # Open MPI's session directory
export SHARDKIT_TIMEOUT=30 GTEST_COLOR=no
failures=0
for n in 1 2 3 4; do
  rm -rf "$out"
  mpirun -np "$n" --allow-run-as-root --oversubscribe --bind-to none \
    --output-filename "$out" "$ranks" --gtest_filter="*/w${n}_*" >/dev/null 2>&1
  rc=$?
  for ((r = 0; r < n; r++)); do
    log="$out/1/rank.$r/stdout"
    if ! grep -Eq '^\[  PASSED  \] [1-9][0-9]* tests?' "$log" 2>/dev/null; then
      echo "FAIL: world $n, rank $r: no passed cases; its output:"
      cat "$out/1/rank.$r/stdout" "$out/1/rank.$r/stderr" 2>/dev/null | grep -v '^\[ *\(RUN\|OK\) *\]'
      failures=$((failures + 1))
    else
      echo "world $n, rank $r: $(grep -E '^\[  PASSED  \]' "$log")"
    fi
  done
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: mpirun -np $n exited $rc"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "conformance passed under mpirun for world sizes 1-4"
