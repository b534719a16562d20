#!/usr/bin/env bash
# The weight_sync example (a contract, docs/cli.md): 2 trainers -> 2 servers under one
# `shardkit launch`; 1 trainer -> 2 servers with a --server-plan (rows, one parameter replicated),
# and with plans that shard nothing (refused unless --allow-replicated-only) or have an idle rule;
# 3 trainers -> 1 server as two launches joined into one world through a store; bad flags.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
example="$TEST_SRCDIR/shardkit/integration/examples/weight_sync"
has() { grep -qE -- "$1" <<<"$out" || fail "missing /$1/ in: $out"; }
pushes() { grep -c "verified" <<<"$out"; }

out=$("$bin" launch --nproc 4 -- "$example" --trainer-ranks 2 --steps 6 --push-every 2 2>&1); rc=$?
check_rc "2 -> 2" 0 $rc
for n in 1 2 3; do has "^\[rank 2\] push $n: 4 parameters, 8\.00 MiB, [0-9.]+ s, verified$"; done
[ "$(pushes)" = 3 ] || fail "2 -> 2: expected 3 pushes: $out"

cat >"$TMPDIR/plan.json" <<'PLAN'
{"rules": [{"match": "layers.0.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
           {"match": "layers.2.weight", "spec": {"type": "chunk", "dim": 1, "placements": ["rank:1", "rank:0"]}}]}
PLAN
out=$("$bin" launch --nproc 3 -- "$example" --trainer-ranks 1 --steps 3 --push-every 1 \
  --mib 2 --params 3 --server-plan "$TMPDIR/plan.json" 2>&1); rc=$?
check_rc "1 -> 2 with a server plan" 0 $rc
has "^\[rank 1\] push 3: 3 parameters, 2\.00 MiB, [0-9.]+ s, verified$"

# A server plan that shards nothing (its one rule matches no parameter): exit 2 on every rank
# unless --allow-replicated-only; an idle rule beside working ones is a warning.
cat >"$TMPDIR/nothing.json" <<'PLAN'
{"rules": [{"match": "layer.*.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]}
PLAN
out=$("$bin" launch --nproc 3 -- "$example" --trainer-ranks 1 --steps 1 --push-every 1 \
  --mib 1 --params 2 --server-plan "$TMPDIR/nothing.json" 2>&1); rc=$?
check_rc "a server plan that shards nothing" 2 $rc
for r in 0 1 2; do
  has "^\[rank $r\] weight_sync: .*nothing.json: the plan shards nothing: no rule matches any of the 2 parameters of the model"
done
out=$("$bin" launch --nproc 3 -- "$example" --trainer-ranks 1 --steps 1 --push-every 1 \
  --mib 1 --params 2 --server-plan "$TMPDIR/nothing.json" --allow-replicated-only 2>&1); rc=$?
check_rc "--allow-replicated-only" 0 $rc
has "^\[rank 1\] push 1: 2 parameters, 1\.00 MiB, [0-9.]+ s, verified$"
cat >"$TMPDIR/idle.json" <<'PLAN'
{"rules": [{"match": "layers.*.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
           {"match": "layers.1.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}]}
PLAN
out=$("$bin" launch --nproc 3 -- "$example" --trainer-ranks 1 --steps 1 --push-every 1 \
  --mib 1 --params 2 --server-plan "$TMPDIR/idle.json" 2>&1); rc=$?
check_rc "an idle server-plan rule" 0 $rc
has "^\[rank 1\] warning: .*idle.json: rules\[1\] \(\"layers.1.weight\"\) matches 1 parameter, taken by rules\[0\]"
[ "$(grep -c "warning:" <<<"$out")" = 1 ] || fail "one warning, from rank 1 only: $out"

# Two launches, one world of 4: ranks 0-2 train, rank 3 serves.
store="file://$TMPDIR/store"
"$bin" launch --nproc 3 --world 4 --rank-offset 0 --store "$store" --run-id ws -- \
  "$example" --trainer-ranks 3 --steps 2 --push-every 1 --mib 1 >"$TMPDIR/a.log" 2>&1 &
a=$!
out=$("$bin" launch --nproc 1 --world 4 --rank-offset 3 --store "$store" --run-id ws -- \
  "$example" --trainer-ranks 3 --steps 2 --push-every 1 --mib 1 2>&1); rc=$?
wait $a; rc_a=$?
check_rc "two launches: the server's" 0 $rc
check_rc "two launches: the trainers'" 0 $rc_a
has "^\[rank 3\] push 2: 4 parameters, 1\.00 MiB, [0-9.]+ s, verified$"

out=$("$example" 2>&1); rc=$?
check_rc "no --trainer-ranks" 2 $rc
has "--trainer-ranks is required"
out=$("$bin" launch --nproc 2 -- "$example" --trainer-ranks 2 2>&1); rc=$?
check_rc "no server rank" 2 $rc
has "--trainer-ranks must be in \[1, 1\] for a world of 2"

[ $failures -eq 0 ] && echo "all weight_sync checks passed"
exit $failures
