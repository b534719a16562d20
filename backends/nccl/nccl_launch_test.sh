#!/usr/bin/env bash
# The --config=cuda build on a machine without a GPU: `shardkit launch` runs Gloo ranks, and NCCL
# ranks fail cleanly with "no CUDA device" (exit 1 from every rank, no signal, no hang).
# With a GPU, the NCCL run must connect instead.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
check="$TEST_SRCDIR/shardkit/backends/nccl/connect_check"
export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$("$bin" launch --nproc 2 --backend gloo --timeout 20 -- "$check" 2>&1)
rc=$?
[ $rc = 0 ] || fail "gloo ranks: exit $rc: $out"
for r in 0 1; do grep -qF "[rank $r] connected gloo $r/2" <<<"$out" || fail "gloo rank $r: $out"; done

out=$("$bin" launch --nproc 1 --backend nccl --timeout 20 -- "$check" 2>&1)
rc=$?
if grep -qF "no CUDA device" <<<"$out"; then
  [ $rc = 1 ] || fail "nccl without a device: exit $rc (expected 1): $out"
  grep -q "killed by signal" <<<"$out" && fail "nccl without a device crashed: $out"
else
  [ $rc = 0 ] || fail "nccl: exit $rc: $out"
  grep -qF "[rank 0] connected nccl 0/1" <<<"$out" || fail "nccl with a device: $out"
fi
echo "$out"

[ $failures = 0 ] || exit 1
echo PASS
