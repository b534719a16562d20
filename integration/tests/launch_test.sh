#!/usr/bin/env bash
# End-to-end checks of `shardkit launch` (the real binary): prefixes per stream, environment,
# exit codes (lowest failed rank, signals), grace/stop, temporary store cleanup, --store run ids,
# bad input (exit 2).
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
has() { grep -qxF -- "$2" <<<"$3" || fail "$1: missing line '$2' in: $3"; }

out=$("$bin" launch --nproc 3 -- sh -c 'echo $SHARDKIT_RANK'); check_rc "three ranks" 0 $?
for r in 0 1 2; do has "stdout prefix" "[rank $r] $r" "$out"; done
[ "$(wc -l <<<"$out")" = 3 ] || fail "three ranks: expected 3 lines: $out"

out=$("$bin" launch --nproc 2 -- sh -c 'echo o; echo e >&2' 2>"$TEST_TMPDIR/err")
err=$(cat "$TEST_TMPDIR/err")
has "stdout stream" "[rank 1] o" "$out"; has "stderr stream" "[rank 1] e" "$err"
grep -q ' e$' <<<"$out" && fail "stderr line leaked to stdout"

out=$("$bin" launch --nproc 2 --timeout 7 --backend fake -- sh -c \
  'echo "$SHARDKIT_RANK $SHARDKIT_LOCAL_RANK $SHARDKIT_WORLD_SIZE $SHARDKIT_BACKEND $SHARDKIT_TIMEOUT $SHARDKIT_HOSTNAME"; echo "$SHARDKIT_STORE" > "$TEST_TMPDIR/store$SHARDKIT_RANK"')
has "env" "[rank 1] 1 1 2 fake 7 127.0.0.1" "$out"
store=$(cat "$TEST_TMPDIR/store0")
case "$store" in file://*) ;; *) fail "default store is not file://: $store" ;; esac
[ -e "${store#file://}" ] && fail "temporary store ${store#file://} not removed"
[ "$store" = "$(cat "$TEST_TMPDIR/store1")" ] || fail "ranks got different stores"

err=$("$bin" launch --nproc 3 -- sh -c 'exit $((SHARDKIT_RANK + 2))' 2>&1 >/dev/null)
check_rc "lowest failed rank" 2 $?
for r in 0 1 2; do has "report" "shardkit launch: rank $r exited with code $((r + 2))" "$err"; done

err=$("$bin" launch --nproc 3 --grace 0.3 -- sh -c \
  'case $SHARDKIT_RANK in 0) sleep 60;; 1) kill -TERM $$;; 2) exit 5;; esac' 2>&1 >/dev/null)
check_rc "signal exit code" 143 $?
has "signal report" "shardkit launch: rank 1 killed by signal 15" "$err"
grep -q 'rank 0 exited\|rank 0 killed' <<<"$err" && fail "stopped rank 0 was counted: $err"

start=$(date +%s)
"$bin" launch --nproc 2 -- sh -c 'sleep 60' & launcher=$!
sleep 0.5; kill -INT $launcher; wait $launcher; check_rc "SIGINT forwarded" 130 $?
[ $(( $(date +%s) - start )) -lt 10 ] || fail "SIGINT did not stop the ranks quickly"

base="$TEST_TMPDIR/shared_store"
"$bin" launch --nproc 1 --store "file://$base" -- sh -c 'echo "$SHARDKIT_STORE $SHARDKIT_RUN_ID"' >"$TEST_TMPDIR/a"
"$bin" launch --nproc 1 --store "file://$base" -- sh -c 'echo "$SHARDKIT_STORE $SHARDKIT_RUN_ID"' >"$TEST_TMPDIR/b"
read -r _ _ url_a id_a <"$TEST_TMPDIR/a"; read -r _ _ url_b id_b <"$TEST_TMPDIR/b"
[ "$url_a" = "file://$base/$id_a" ] || fail "--store run id: $url_a vs $id_a"
[ "$id_a" != "$id_b" ] || fail "two runs share run id $id_a"

# Multi-host: two launchers of one 4-rank job agree on the run id through the store; each gives
# its own ranks a launch id of its own.
for offset in 0 2; do
  "$bin" launch --nproc 2 --world 4 --rank-offset $offset --store "file://$base" -- \
    sh -c 'echo "$SHARDKIT_RANK/$SHARDKIT_WORLD_SIZE $SHARDKIT_STORE $SHARDKIT_LAUNCH_ID"' \
    >"$TEST_TMPDIR/host$offset" &
done
wait
hosts=$(cat "$TEST_TMPDIR/host0" "$TEST_TMPDIR/host2")
[ "$(awk '{print $4}' <<<"$hosts" | sort -u | wc -l)" = 1 ] || fail "hosts disagree on store: $hosts"
[ "$(awk '{print $3}' <<<"$hosts" | sort | tr '\n' ' ')" = "0/4 1/4 2/4 3/4 " ] || fail "ranks: $hosts"
for offset in 0 2; do
  [ "$(awk '{print $5}' "$TEST_TMPDIR/host$offset" | sort -u | grep -c '^launch-')" = 1 ] ||
    fail "launch id of host $offset: $hosts"
done
[ "$(awk '{print $5}' <<<"$hosts" | sort -u | wc -l)" = 2 ] || fail "launches share an id: $hosts"

touch "$TEST_TMPDIR/regular"
err=$("$bin" launch --nproc 1 --store "file://$TEST_TMPDIR/regular/x" -- true 2>&1)
check_rc "store below a file" 2 $?; grep -q 'Not a directory' <<<"$err" || fail "ENOTDIR message: $err"
"$bin" launch --nproc 2 true 2>/dev/null; check_rc "missing --" 2 $?
"$bin" launch --nproc 2 -- 2>/dev/null; check_rc "empty command" 2 $?
"$bin" launch --nproc 0 -- true 2>/dev/null; check_rc "nproc 0" 2 $?
"$bin" launch --nproc 2 --world 0 -- true 2>/dev/null; check_rc "world 0" 2 $?
err=$("$bin" launch --nproc 2 --world 1048577 -- true 2>&1)
check_rc "world 2^20+1" 2 $?; grep -qF -- '--world: 1048577 is out of range [1, 1048576]' <<<"$err" || fail "world limit msg: $err"
err=$("$bin" launch --nproc 2 --world 3 --rank-offset 2 --store "file://$base" -- true 2>&1)
check_rc "rank >= world" 2 $?; grep -q 'do not fit in --world 3' <<<"$err" || fail "offset msg: $err"
"$bin" launch --nproc 1 --store "ftp://x" -- true 2>/dev/null; check_rc "bad store URL" 2 $?
out=$("$bin" launch --help); check_rc "--help" 0 $?; grep -q -- '--grace' <<<"$out" || fail "help"

leftovers=$(ls "$TMPDIR")
[ -z "$leftovers" ] || fail "temporary stores left behind: $leftovers"
[ $failures -eq 0 ] && echo "all launch checks passed"
exit $failures
