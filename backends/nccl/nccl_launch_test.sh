#!/usr/bin/env bash
# The --config=cuda build of `shardkit` (only Gloo built in) with the NCCL plugin on
# SHARDKIT_PLUGIN_PATH, on a machine without a GPU: `--version` lists the plugin, `shardkit launch`
# runs Gloo ranks, and NCCL ranks (`launch`, `demo --backend nccl`) fail cleanly with the plugin's
# "no CUDA device" (exit 1 from every rank, no signal, no hang). With a GPU, NCCL must connect.
# Without the plugin on the path, `--backend nccl` is exit 2 naming where it was looked for.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
check="$TEST_SRCDIR/shardkit/backends/nccl/connect_check"
plugins="$TEST_SRCDIR/shardkit/backends/nccl"
export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$(SHARDKIT_PLUGIN_PATH=/nonexistent "$bin" demo --backend nccl --nproc 1 2>&1)
rc=$?
[ $rc = 2 ] || fail "nccl not on the path: exit $rc (expected 2): $out"
grep -qF 'backend "nccl" not found: built in: gloo; no libshardkit_backend_nccl.so in: /nonexistent, ' \
  <<<"$out" || fail "nccl not on the path: $out"

export SHARDKIT_PLUGIN_PATH="$plugins"
out=$("$bin" --version 2>&1)
grep -qE '^shardkit [0-9.]+ \(build [0-9a-f]{16}\)$' <<<"$out" || fail "--version: $out"
grep -qxF "gloo: built in" <<<"$out" || fail "--version, gloo: $out"
grep -qxF "nccl: plugin $plugins/libshardkit_backend_nccl.so" <<<"$out" || fail "--version, nccl: $out"
echo "$out"

out=$("$bin" launch --nproc 2 --backend gloo --timeout 20 -- "$check" 2>&1)
rc=$?
[ $rc = 0 ] || fail "gloo ranks: exit $rc: $out"
for r in 0 1; do grep -qF "[rank $r] connected gloo $r/2" <<<"$out" || fail "gloo rank $r: $out"; done

# Rank programs and `demo` load the plugin by name; without a device both end in "no CUDA device".
for cmd in "launch --nproc 1 --backend nccl --timeout 20 -- $check" "demo --backend nccl --nproc 1"; do
  out=$("$bin" $cmd 2>&1)
  rc=$?
  if grep -qF "no CUDA device" <<<"$out"; then
    [ $rc = 1 ] || fail "$cmd without a device: exit $rc (expected 1): $out"
    grep -q "killed by signal" <<<"$out" && fail "$cmd without a device crashed: $out"
  else
    [ $rc = 0 ] || fail "$cmd: exit $rc: $out"
  fi
  echo "$out"
done

[ $failures = 0 ] || exit 1
echo PASS
