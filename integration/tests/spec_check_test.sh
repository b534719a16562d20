#!/usr/bin/env bash
# Runs the real `shardkit spec check` on good and malformed files: stdout shape, exit codes,
# first stderr line.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
data="$TEST_SRCDIR/shardkit/specs/testdata"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A spec: canonical line, fingerprint line, nothing else.
out=$("$bin" spec check "$data/chunk_rows.json" 2>"$tmp/err") || fail "chunk_rows exit $?"
[ "$(sed -n 1p <<<"$out")" = "$(cat "$data/chunk_rows.canonical")" ] || fail "chunk_rows canonical"
[ "$(sed -n 2p <<<"$out")" = "$(cat "$data/chunk_rows.fingerprint")" ] || fail "chunk_rows fingerprint"
[ "$(wc -l <<<"$out")" -eq 2 ] || fail "chunk_rows: extra stdout lines"
[ ! -s "$tmp/err" ] || fail "chunk_rows: stderr not empty"

# With --shape and --world: bound form, fingerprint, shard table.
out=$("$bin" spec check "$data/chunk_shorthand.json" --shape 5,7 --world 3) || fail "bound exit $?"
expected='{"dim":1,"placements":["rank:0/cpu","rank:1/cpu","rank:2/cpu"],"type":"chunk","version":1}'
[ "$(sed -n 1p <<<"$out")" = "$expected" ] || fail "bound canonical: $(sed -n 1p <<<"$out")"
grep -Eq '^sha256:[0-9a-f]{64}$' <<<"$(sed -n 2p <<<"$out")" || fail "bound fingerprint line"
[ "$(sed -n 3p <<<"$out" | tr -s ' ')" = "index rank offsets sizes" ] || fail "table header"
[ "$(sed -n 6p <<<"$out" | tr -s ' ')" = "2 2 [0, 6] [5, 1]" ] || fail "table row 2: $(sed -n 6p <<<"$out")"
[ "$(wc -l <<<"$out")" -eq 6 ] || fail "bound: line count"

# "align": in the canonical form only when it is not 1; the shard table follows the aligned split.
out=$("$bin" spec check "$data/chunk_align.json") || fail "chunk_align exit $?"
[ "$(sed -n 1p <<<"$out")" = "$(cat "$data/chunk_align.canonical")" ] || fail "chunk_align canonical"
[ "$(sed -n 2p <<<"$out")" = "$(cat "$data/chunk_align.fingerprint")" ] || fail "chunk_align fingerprint"
out=$("$bin" spec check "$data/chunk_align_one.json") || fail "chunk_align_one exit $?"
[ "$out" = "$("$bin" spec check "$data/chunk_rows.json")" ] || fail "align 1 is not chunk_rows: $out"
out=$("$bin" spec check "$data/chunk_align.json" --shape 300,256 --world 3) || fail "aligned bound exit $?"
[ "$(sed -n 1p <<<"$out")" = "$(cat "$data/chunk_align.canonical")" ] || fail "aligned bound canonical"
[ "$(sed -n 4,6p <<<"$out" | tr -s ' ')" = "0 0 [0, 0] [128, 256]
1 1 [128, 0] [128, 256]
2 2 [256, 0] [44, 256]" ] || fail "aligned table: $(sed -n 4,6p <<<"$out")"
echo '{"type": "chunk", "dim": -1, "align": 128, "placements": {"ranks": "all"}}' >"$tmp/align_all.json"
out=$("$bin" spec check "$tmp/align_all.json" --shape 256,300 --world 4) || fail "aligned shorthand exit $?"
expected='{"align":128,"dim":1,"placements":["rank:0","rank:1","rank:2","rank:3"],"type":"chunk","version":1}'
[ "$(sed -n 1p <<<"$out")" = "$expected" ] || fail "aligned shorthand canonical: $(sed -n 1p <<<"$out")"
# Zero-size tail: 300 columns in 128-column chunks over 4 ranks leave rank 3 none, at the end.
[ "$(sed -n 4,7p <<<"$out" | tr -s ' ')" = "0 0 [0, 0] [256, 128]
1 1 [0, 128] [256, 128]
2 2 [0, 256] [256, 44]
3 3 [0, 300] [256, 0]" ] || fail "aligned shorthand table: $(sed -n 4,7p <<<"$out")"
out=$("$bin" spec check "$data/plan_fp8_blocks.json") || fail "plan_fp8_blocks exit $?"
[ "$(sed -n 1p <<<"$out")" = "$(cat "$data/plan_fp8_blocks.canonical")" ] || fail "plan_fp8_blocks canonical"

# A plan is recognised by "rules".
out=$("$bin" spec check "$data/plan_example.json") || fail "plan exit $?"
[ "$(sed -n 1p <<<"$out")" = "$(cat "$data/plan_example.canonical")" ] || fail "plan canonical"
# Every strategy is accepted, and kept in the canonical form; another is refused at its path.
for strategy in scatter broadcast direct; do
  echo "{\"rules\": [], \"strategy\": \"$strategy\"}" >"$tmp/plan_$strategy.json"
  out=$("$bin" spec check "$tmp/plan_$strategy.json") || fail "plan $strategy exit $?"
  [ "$(sed -n 1p <<<"$out")" = "{\"rules\":[],\"src_rank\":0,\"strategy\":\"$strategy\",\"version\":1}" ] ||
    fail "plan $strategy canonical: $(sed -n 1p <<<"$out")"
done
echo '{"rules": [], "strategy": "gather"}' >"$tmp/plan_gather.json"
"$bin" spec check "$tmp/plan_gather.json" 2>"$tmp/err" >/dev/null
[ $? -eq 2 ] && grep -q 'strategy: expected "scatter", "broadcast" or "direct", got "gather"' "$tmp/err" ||
  fail "plan gather: $(cat "$tmp/err")"

# Malformed and invalid inputs: exit 2, the error first on stderr, nothing on stdout.
expect_invalid() {  # NAME EXPECTED_SUBSTRING ARGS...
  local name=$1 want=$2
  shift 2
  out=$("$bin" spec check "$@" 2>"$tmp/err"); rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2"
  [ -z "$out" ] || fail "$name: stdout not empty"
  head -1 "$tmp/err" | grep -qF -- "$want" || fail "$name: stderr: $(head -1 "$tmp/err")"
}
expect_invalid dim_string 'dim: expected integer, got "x"' "$data/invalid/dim_string.json"
expect_invalid truncated 'invalid JSON: parse error at line 1, column 18' "$data/invalid/truncated.json"
expect_invalid plan_bad_dim 'rules[1].spec.dim: expected integer' "$data/invalid/plan_bad_dim.json"
expect_invalid align_zero 'align: expected a positive integer, got 0' "$data/invalid/align_zero.json"
expect_invalid plan_align_string 'rules[0].spec.align: expected a positive integer, got "128"' \
  "$data/invalid/plan_align_string.json"
expect_invalid zero_d 'a 0-d tensor cannot be chunked' "$data/chunk_rows.json" --shape ''
expect_invalid world 'outside the world of 2 ranks' "$data/enumerable_grid.json" --shape 10,10 --world 2
# Overlapping enumerable shards need no --shape to be rejected.
expect_invalid overlap 'shards 0 (offsets [0, 0], sizes [3, 3], rank:0/cpu) and 1 (offsets [2, 0], sizes [3, 3], rank:1/cpu) overlap' \
  "$data/invalid/enumerable_overlap.json"
expect_invalid shorthand 'once the world size is known' "$data/chunk_shorthand.json" --shape 4,4
expect_invalid missing 'no such file' "$tmp/does-not-exist.json"
expect_invalid bad_shape '--shape: expected non-negative integers' "$data/chunk_rows.json" --shape 4,x
expect_invalid bad_flag 'unknown flag --frob' "$data/chunk_rows.json" --frob
expect_invalid no_file 'expected exactly one FILE.json'
# {"ranks": "all"} for a claimed world of 2^31: a clear error naming the flag and the limit, not
# std::bad_alloc; the limit itself is accepted.
expect_invalid world_too_big '--world: 2147483648 is out of range [1, 1048576]' \
  "$data/chunk_shorthand.json" --world 2147483648
expect_invalid plan_world_too_big '--world: 1048577 is out of range [1, 1048576]' \
  "$data/plan_example.json" --world 1048577
out=$("$bin" spec check "$data/chunk_shorthand.json" --world 1048576) || fail "world 2^20 exit $?"
[ "$(wc -l <<<"$out")" -eq 2 ] || fail "world 2^20: line count"
"$bin" spec check --help | grep -q '^usage: shardkit spec check' || fail "--help"

[ $failures -eq 0 ] && echo "all spec check CLI tests passed"
exit $failures
