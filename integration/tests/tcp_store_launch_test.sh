#!/usr/bin/env bash
# The tcp:// store end to end, real processes over real Gloo on 127.0.0.1: `shardkit launch
# --store tcp://127.0.0.1:0` (the launcher serves it on a free port), two launchers of one 4-rank
# job (--world 4 --rank-offset 0|2; the second host's launcher starts first and waits), rank
# programs started without a launcher (rank 0's own process serves), the launcher of rank 0
# SIGKILLed while the other host's ranks wait (they fail fast, naming the store), bad URLs.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
export SHARDKIT_HOSTNAME=127.0.0.1  # what Gloo binds in the "multi-host" runs
# A port below the ephemeral range (checkpoint_testlib.free_port): a bind(0) port could be taken
# by a test running beside this one before the store binds it.
free_port() { python3 "$TEST_SRCDIR/shardkit/integration/tests/checkpoint_testlib.py" free_port; }
has() { grep -qF -- "$2" <<<"$3" || fail "$1: missing '$2' in: $3"; }

out=$(timeout 60 "$bin" launch --nproc 3 --store tcp://127.0.0.1:0 -- "$bin" demo 2>&1)
check_rc "demo on 3 ranks over tcp://127.0.0.1:0" 0 $?
has "demo verified" "verified: all 53 parameters bit-exact" "$out"

out=$(timeout 60 "$bin" launch --nproc 2 --store tcp://127.0.0.1:0/jobs -- sh -c 'echo "$SHARDKIT_STORE"')
check_rc "port 0 env" 0 $?
urls=$(sed 's/^\[rank [01]\] //' <<<"$out" | sort -u)
grep -qE '^tcp://127\.0\.0\.1:[1-9][0-9]*/jobs/run-[0-9a-f]{16}$' <<<"$urls" ||
  fail "SHARDKIT_STORE should name the port chosen and the run id, once: $urls"

port=$(free_port)
url="tcp://127.0.0.1:$port"
timeout 60 "$bin" launch --nproc 2 --world 4 --rank-offset 2 --store "$url" -- "$bin" demo \
  >"$TEST_TMPDIR/b.out" 2>&1 & host_b=$!
sleep 1  # host B's launcher now retries connecting to the store host A will serve
timeout 60 "$bin" launch --nproc 2 --world 4 --rank-offset 0 --store "$url" -- "$bin" demo \
  >"$TEST_TMPDIR/a.out" 2>&1
check_rc "multi-host host A" 0 $?
wait $host_b; check_rc "multi-host host B" 0 $?
has "multi-host verified" "verified: all 53 parameters bit-exact" "$(cat "$TEST_TMPDIR/a.out")"

# Without a launcher: rank 1 starts first and waits; rank 0's process serves the store.
port=$(free_port)
for rank in 1 0; do
  SHARDKIT_RANK=$rank SHARDKIT_WORLD_SIZE=2 SHARDKIT_STORE="tcp://127.0.0.1:$port" \
    timeout 60 "$bin" demo >"$TEST_TMPDIR/self$rank.out" 2>&1 & pids[$rank]=$!
  sleep 0.5
done
wait ${pids[0]}; check_rc "rank 0 serving its own store" 0 $?
wait ${pids[1]}; check_rc "rank 1 of a store served by rank 0" 0 $?
has "self-served verified" "verified: all 53 parameters bit-exact" "$(cat "$TEST_TMPDIR/self0.out")"

# The launcher holding the store dies while host B's ranks wait for host A's in the rendezvous.
port=$(free_port)
url="tcp://127.0.0.1:$port"
"$bin" launch --nproc 2 --world 4 --rank-offset 0 --timeout 30 --store "$url" -- sleep 60 &
host_a=$!
start=$(date +%s.%N)
timeout 60 "$bin" launch --nproc 2 --world 4 --rank-offset 2 --timeout 30 --store "$url" -- \
  "$bin" demo >"$TEST_TMPDIR/orphans.out" 2>&1 & host_b=$!
sleep 2
kill -KILL $host_a; wait $host_a 2>/dev/null
wait $host_b; check_rc "host B after the store's launcher died" 1 $?
elapsed=$(python3 -c "import time; print(int(time.time() - $start))")
[ "$elapsed" -lt 10 ] || fail "host B took ${elapsed}s to fail (deadline 30 s): should be at once"
err=$(cat "$TEST_TMPDIR/orphans.out")
for r in 2 3; do has "rank $r names the store" "[rank $r] shardkit demo: TcpStore($url)" "$err"; done
has "the reason" "did the process serving the store exit" "$err"

err=$("$bin" launch --nproc 1 --world 2 --store tcp://127.0.0.1:0 -- true 2>&1)
check_rc "port 0 multi-host" 2 $?; has "port 0 message" "must all name the same port" "$err"
err=$("$bin" launch --nproc 1 --store tcp://127.0.0.1 -- true 2>&1)
check_rc "no port" 2 $?; has "no port message" "a tcp:// URL needs a port" "$err"
err=$("$bin" launch --nproc 1 --store tcp://192.0.2.1:29500 -- true 2>&1)
check_rc "rank 0 elsewhere" 2 $?; has "not local message" "not an address of this machine" "$err"
port=$(free_port)
start=$(date +%s)
err=$("$bin" launch --nproc 1 --world 2 --rank-offset 1 --timeout 1 --store "tcp://127.0.0.1:$port" -- true 2>&1)
check_rc "nobody serving" 1 $?
has "nobody serving message" "TcpStore(tcp://127.0.0.1:$port): cannot connect within" "$err"
[ $(( $(date +%s) - start )) -lt 5 ] || fail "nobody serving: not bounded by --timeout 1"

[ $failures -eq 0 ] && echo "all tcp store launch checks passed"
exit $failures
