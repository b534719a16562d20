#!/usr/bin/env bash
# Runs the example program on 2 local ranks under `shardkit launch` and checks each rank's shards
# and the gathered parameter.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
example="$TEST_SRCDIR/shardkit/integration/examples/shard_example"
has() { grep -qxF -- "$1" <<<"$out" || fail "missing line '$1' in: $out"; }

out=$("$bin" launch --nproc 2 -- "$example"); rc=$?
check_rc "example on 2 ranks" 0 $rc
# layers.*.weight [5, 4] by rows over 2 ranks: rows 0-2 and 3-4 (element 12 starts row 3).
has "[rank 0] rank 0: layers.0.weight shard 0 offsets [0, 0] sizes [3, 4] first value 0"
has "[rank 1] rank 1: layers.1.weight shard 1 offsets [3, 0] sizes [2, 4] first value 12"
# embed.weight [6, 4] by columns: rank 1 holds columns 2-3.
has "[rank 1] rank 1: embed.weight shard 1 offsets [0, 2] sizes [6, 2] first value 2"
has "[rank 1] rank 1: norm.weight replicated [4]"
has "[rank 0] rank 0: gathered embed.weight [6, 4] matches the original"
[ "$(wc -l <<<"$out")" = 9 ] || fail "expected 9 lines: $out"

[ $failures -eq 0 ] && echo "all example checks passed"
exit $failures
