#!/usr/bin/env bash
# End-to-end checks of `shardkit demo` (the real binary): the summary on 3 and 1 ranks, exit codes,
# output discipline (summary on stdout without rank prefixes, progress on stderr), bad flags
# (exit 2), running as one rank under `shardkit launch`, no temporary files left behind.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
has() { grep -qE -- "$2" <<<"$3" || fail "$1: no line matching '$2' in:
$3"; }

out=$("$bin" demo --nproc 3 2>"$TEST_TMPDIR/err"); check_rc "demo --nproc 3" 0 $?
err=$(cat "$TEST_TMPDIR/err")
has "header" "^shardkit demo: 53 parameters, 65\.3 MiB float32, 3 ranks, backend gloo, strategy scatter, source rank 0$" "$out"
has "rows" "^embed\.weight +\[8192, 384\] +rows \(chunk dim 0\) +\[2731, 384\] +\[2731, 384\] +\[2730, 384\]$" "$out"
has "columns (dim -1), grouped" "^layers\.\*\.mlp\.down\.weight ×6 +\[384, 1536\] +columns \(chunk dim 1\) +\[384, 512\] +\[384, 512\] +\[384, 512\]$" "$out"
has "enumerable" "^head\.weight +\[8192, 384\] +enumerable \(4 shards\) +\[4096, 192\] \+ \[4096, 192\] +\[4096, 192\] +\[4096, 192\]$" "$out"
has "replicated" "^norm\.weight +\[384\] +replicated +\[384\] +\[384\] +\[384\]$" "$out"
has "rank table" "^rank +shards +holds MiB +shard: recv MiB" "$out"
has "rank 2 row" "^2 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$out"
has "verdict" "^verified: all 53 parameters bit-exact" "$out"
has "total time" "^total time: [0-9.]+ s" "$out"
grep -q '^\[rank' <<<"$out" && fail "rank-prefixed lines on stdout: $out"
has "progress on stderr" "^\[rank 0\] demo: sharding across 3 ranks$" "$err"

out=$("$bin" demo --nproc 1 --timeout 30 2>/dev/null); check_rc "demo --nproc 1" 0 $?
has "one rank" "^shardkit demo: 53 parameters, 65\.3 MiB float32, 1 rank, backend gloo" "$out"
has "several shards on one rank" "^head\.weight .*enumerable \(4 shards\) +\[4096, 192\] \+ \[4096, 192\] \+ \[4096, 192\] \+ \[4096, 192\]$" "$out"
has "verdict (1 rank)" "^verified: all 53 parameters bit-exact" "$out"

# As one rank under a launcher: rank 0 prints the summary itself.
out=$("$bin" launch --nproc 2 -- "$bin" demo 2>/dev/null); check_rc "under launch" 0 $?
has "summary under launch" "^\[rank 0\] verified: all 53 parameters bit-exact" "$out"

err=$("$bin" demo --nproc 0 2>&1 >/dev/null); check_rc "--nproc 0" 2 $?
has "--nproc 0 message" "^shardkit demo: .*nproc" "$(head -1 <<<"$err")"
"$bin" demo --frobnicate 2>/dev/null; check_rc "unknown flag" 2 $?
"$bin" demo extra 2>/dev/null; check_rc "positional argument" 2 $?
"$bin" demo --timeout 0 2>/dev/null; check_rc "--timeout 0" 2 $?
err=$("$bin" launch --nproc 1 -- "$bin" demo --nproc 2 2>&1 >/dev/null); check_rc "--nproc under launch" 2 $?
has "--nproc under launch message" "cannot be used under a launcher" "$err"
err=$("$bin" demo --nproc 2 --backend nope 2>&1 >/dev/null); check_rc "unknown backend" 2 $?
has "unknown backend message" "nope" "$err"
out=$("$bin" demo --help); check_rc "--help" 0 $?; has "help" "--nproc" "$out"

leftovers=$(ls "$TMPDIR")
[ -z "$leftovers" ] || fail "temporary files left behind: $leftovers"
[ $failures -eq 0 ] && echo "all demo checks passed"
exit $failures
