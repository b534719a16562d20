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

# The dry run: a plan bound to a checkpoint's header for --world N ranks, in one process.
# st FILE HEADER_JSON DATA_BYTES: a safetensors file (ASCII header, zero data).
st() {
  local n=${#2}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((n & 255)) $((n >> 8 & 255)) \
    $((n >> 16 & 255)) $((n >> 24 & 255)))" >"$1"
  printf '%s' "$2" >>"$1"
  head -c "$3" /dev/zero >>"$1"
}
ck="$tmp/model.safetensors"
st "$ck" '{"__metadata__":{"format":"pt"},"embed.weight":{"dtype":"F32","shape":[10,8],"data_offsets":[0,320]},"layers.0.attn.qkv.weight":{"dtype":"F32","shape":[6,4],"data_offsets":[320,416]},"layers.0.attn.out.weight":{"dtype":"F32","shape":[4,4],"data_offsets":[416,480]},"norm.weight":{"dtype":"F32","shape":[4],"data_offsets":[480,496]}}' 496
cat >"$tmp/dry.json" <<'JSON'
{"rules": [
  {"match": "layers.*.attn.*.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
  {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": ["rank:2/cuda:2", "rank:0/cuda:0", "rank:1/cuda:1"]}},
  {"match": "lm_head.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
  {"match": "layers.*.attn.out.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}]}
JSON
out=$("$bin" spec check "$tmp/dry.json" --checkpoint "$ck" --world 3 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] || fail "dry run: exit $rc: $(cat "$tmp/err")"
[ "$(tr -s ' ' <<<"$out")" = "name dtype shape bytes spec rule rank 0 rank 1 rank 2
embed.weight F32 [10, 8] 320 chunk(dim=1) rules[1] [10, 3] [10, 2] [10, 3]
layers.0.attn.out.weight F32 [4, 4] 64 chunk(dim=0) rules[0] [2, 4] [2, 4] [0, 4]
layers.0.attn.qkv.weight F32 [6, 4] 96 chunk(dim=0) rules[0] [2, 4] [2, 4] [2, 4]
norm.weight F32 [4] 16 replicated - [4] [4] [4]

world_size 3
src_rank 0
strategy scatter
metadata format pt" ] || fail "dry run table: $out"
[ "$(cat "$tmp/err")" = "warning: $tmp/dry.json: rules[2] (\"lm_head.weight\") matches no parameter of the checkpoint
warning: $tmp/dry.json: rules[3] (\"layers.*.attn.out.weight\") matches 1 parameter, taken by rules[0] (\"layers.*.attn.*.weight\")" ] ||
  fail "dry run warnings: $(cat "$tmp/err")"
# --strict: the same findings are exit 2 (nothing on stdout).
expect_invalid dry_strict "$tmp/dry.json: --strict: rules[2] (\"lm_head.weight\") matches no parameter of the checkpoint; rules[3] (\"layers.*.attn.out.weight\") matches 1 parameter, taken by rules[0]" \
  "$tmp/dry.json" --checkpoint "$ck" --world 3 --strict
echo '{"rules": []}' >"$tmp/none.json"
expect_invalid dry_shards_nothing 'the plan shards nothing' "$tmp/none.json" --checkpoint "$ck" --world 2 --strict
# Flags: --checkpoint needs --world and a plan; --shape excludes it; --strict and the FP8 flags need it.
expect_invalid dry_no_world '--world is required with --checkpoint' "$tmp/dry.json" --checkpoint "$ck"
expect_invalid dry_shape '--shape and --checkpoint exclude each other' "$tmp/dry.json" --checkpoint "$ck" --world 2 --shape 4,4
expect_invalid strict_alone '--strict applies to the dry run' "$tmp/dry.json" --world 2 --strict
expect_invalid fp8_alone '--fp8-block applies to the dry run' "$tmp/dry.json" --fp8-block 64
expect_invalid dry_spec '--checkpoint applies to a plan' "$data/chunk_rows.json" --checkpoint "$ck" --world 2
expect_invalid dry_missing 'no such file' "$tmp/dry.json" --checkpoint "$tmp/nope.safetensors" --world 2
echo '{"src_rank": 3, "rules": []}' >"$tmp/src3.json"
expect_invalid dry_src_rank 'src_rank 3 is outside the world of 2 ranks' "$tmp/src3.json" --checkpoint "$ck" --world 2
# What `shard` only found once started: a gap in an enumerable rule, a rank outside the world.
cat >"$tmp/gap.json" <<'JSON'
{"rules": [{"match": "norm.weight", "spec": {"type": "enumerable", "shards": [
  {"offsets": [0], "sizes": [2], "placement": "rank:0"}, {"offsets": [3], "sizes": [1], "placement": "rank:1"}]}}]}
JSON
expect_invalid dry_gap 'parameter "norm.weight" (rule 0, "norm.weight"): shards do not cover the tensor' \
  "$tmp/gap.json" --checkpoint "$ck" --world 2
expect_invalid dry_world 'outside the world of 2 ranks' "$tmp/dry.json" --checkpoint "$ck" --world 2
# FP8 block scales: 256 rows on 3 ranks cut off the 128-row blocks; --allow-misaligned-scales warns.
st "$tmp/fp8.safetensors" '{"w":{"dtype":"F8_E4M3","shape":[256,128],"data_offsets":[0,32768]},"w_scale_inv":{"dtype":"F32","shape":[2,1],"data_offsets":[32768,32776]}}' 32776
echo '{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]}' >"$tmp/fp8.json"
expect_invalid dry_fp8 'w (F8_E4M3 [256, 128]) is cut at 86 on dim 0' "$tmp/fp8.json" --checkpoint "$tmp/fp8.safetensors" --world 3
out=$("$bin" spec check "$tmp/fp8.json" --checkpoint "$tmp/fp8.safetensors" --world 3 --allow-misaligned-scales 2>"$tmp/err") ||
  fail "dry fp8 allowed: exit $?"
grep -q '^warning: FP8 block scales: w (F8_E4M3 \[256, 128\]) is cut at 86' "$tmp/err" || fail "dry fp8 warning: $(cat "$tmp/err")"
# --fp8-block reaches the check: scales of 128-row blocks are not those of 2x2 blocks.
"$bin" spec check "$tmp/fp8.json" --checkpoint "$tmp/fp8.safetensors" --world 3 --fp8-block 2 >/dev/null 2>"$tmp/err" ||
  fail "dry fp8 block 2: exit $?"
grep -q 'one scale per 2×2 block of w (F8_E4M3 \[256, 128\]) (--fp8-block 2): not checked' "$tmp/err" ||
  fail "dry fp8 block 2: $(cat "$tmp/err")"
# A sub-byte tensor cut inside a byte; a name with '#'.
st "$tmp/f4.safetensors" '{"q":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}' 3
echo '{"rules": [{"match": "q", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}]}' >"$tmp/f4.json"
expect_invalid dry_sub_byte 'parameter "q" (F4[2, 3]): shard 0' "$tmp/f4.json" --checkpoint "$tmp/f4.safetensors" --world 3
st "$tmp/hash.safetensors" '{"a#1":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
expect_invalid dry_hash "parameter \"a#1\": names must not contain '#'" "$tmp/none.json" --checkpoint "$tmp/hash.safetensors" --world 2
# A directory holding a Hugging Face index and its files.
mkdir -p "$tmp/hf"
st "$tmp/hf/model-00001-of-00002.safetensors" '{"a.weight":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]}}' 32
st "$tmp/hf/model-00002-of-00002.safetensors" '{"b.weight":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}}' 6
echo '{"metadata": {"total_size": 38}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}' \
  >"$tmp/hf/model.safetensors.index.json"
echo '{"rules": [{"match": "*.weight", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:1", "rank:0"]}}]}' >"$tmp/hf.json"
out=$("$bin" spec check "$tmp/hf.json" --checkpoint "$tmp/hf" --world 2 2>"$tmp/err") || fail "dry hf: exit $?: $(cat "$tmp/err")"
[ "$(sed -n 2,3p <<<"$out" | tr -s ' ')" = "a.weight F32 [4, 2] 32 chunk(dim=0) rules[0] [2, 2] [2, 2]
b.weight BF16 [3] 6 chunk(dim=0) rules[0] [1] [2]" ] || fail "dry hf table: $out"
# A shard directory: bound as `reshard` binds it (its plan's src_rank and strategy ignored).
"$bin" shard --plan "$tmp/hf.json" --checkpoint "$tmp/hf" --out "$tmp/shards" --nproc 2 2>"$tmp/err" >/dev/null || fail "shard for the dry run: $(cat "$tmp/err")"
echo '{"src_rank": 1, "rules": [{"match": "a.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}]}' >"$tmp/re.json"
out=$("$bin" spec check "$tmp/re.json" --checkpoint "$tmp/shards" --world 2 2>"$tmp/err") || fail "dry reshard: exit $?: $(cat "$tmp/err")"
[ "$(sed -n 2p <<<"$out" | tr -s ' ')" = "a.weight F32 [4, 2] 32 chunk(dim=1) rules[0] [4, 1] [4, 1]" ] || fail "dry reshard table: $out"
grep -q '^strategy *reshard$' <<<"$out" || fail "dry reshard strategy: $out"
grep -q "^warning: $tmp/re.json: src_rank does not apply to reshard" "$tmp/err" || fail "dry reshard warning: $(cat "$tmp/err")"

[ $failures -eq 0 ] && echo "all spec check CLI tests passed"
exit $failures
