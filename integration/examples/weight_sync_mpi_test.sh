#!/usr/bin/env bash
# The weight_sync example over the MPI backend plugin (SHARDKIT_BACKEND=mpi, ranks from mpirun):
# one program on 4 ranks, then trainers and servers as two programs of one MPI job (mpirun's
# `A : B`), each push verified.
set -u
example="$TEST_SRCDIR/shardkit/integration/examples/weight_sync"
for v in $(env | grep -o '^SHARDKIT_[A-Z_]*'); do unset "$v"; done  # as a user's shell under mpirun
export SHARDKIT_PLUGIN_PATH="$TEST_SRCDIR/shardkit/backends/mpi" SHARDKIT_BACKEND=mpi
export SHARDKIT_TIMEOUT=60 TMPDIR="$TEST_TMPDIR"  # Open MPI's session directory
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$("${mpirun[@]}" -np 4 "$example" --trainer-ranks 2 --steps 4 --push-every 2 2>&1); rc=$?
[ $rc = 0 ] || fail "mpirun -np 4: exit $rc: $out"
[ "$(grep -cE '^push [12]: 4 parameters, 8\.00 MiB, [0-9.]+ s, verified$' <<<"$out")" = 2 ] ||
  fail "mpirun -np 4: expected pushes 1 and 2: $out"

out=$("${mpirun[@]}" -np 3 "$example" --trainer-ranks 3 --steps 2 --push-every 1 --mib 2 : \
  -np 1 "$example" --trainer-ranks 3 --steps 2 --push-every 1 --mib 2 2>&1); rc=$?
[ $rc = 0 ] || fail "mpirun A : B: exit $rc: $out"
grep -qE '^push 2: 4 parameters, 2\.00 MiB, [0-9.]+ s, verified$' <<<"$out" ||
  fail "mpirun A : B: no verified push 2: $out"

[ $failures = 0 ] && echo "weight_sync verified under mpirun, one program and two"
exit $failures
