#!/usr/bin/env bash
# SaveShards from 4 real ranks under `shardkit launch`, then the shardkit binary on the saved
# directory: `inspect` shows strategy save, `gather` gives back exactly the full checkpoint,
# `reshard` reads it; LoadShards at 3 ranks (another plan) and at 2 from the resharded copy, each
# rank checking its shards; a save into a directory holding a foreign file fails on every rank.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
example="$TEST_SRCDIR/shardkit/integration/examples/save_example"
dir="$TMPDIR/saved"
has() { grep -qF -- "$1" <<<"$out" || fail "missing '$1' in: $out"; }

out=$("$bin" launch --nproc 4 -- "$example" save "$dir" "$TMPDIR/ref.safetensors" 2>&1); rc=$?
check_rc "save on 4 ranks" 0 $rc
has "[rank 3] rank 3: saved 3 parameters"
for r in 0 1 2 3; do [ -f "$dir/rank-0000$r.safetensors" ] || fail "no rank file $r"; done
grep -q '"strategy": *"save"' "$dir/index.json" || fail "index.json: $(head -c 300 "$dir/index.json")"

out=$("$bin" inspect "$dir" 2>&1); rc=$?
check_rc "inspect" 0 $rc
has "save"
has "layers.0.weight"

out=$("$bin" gather --in "$dir" --out "$TMPDIR/gathered.safetensors" 2>&1); rc=$?
check_rc "gather" 0 $rc
cmp "$TMPDIR/gathered.safetensors" "$TMPDIR/ref.safetensors" || fail "gathered file differs from the full checkpoint"

out=$("$bin" launch --nproc 3 -- "$example" load "$dir" 2>&1); rc=$?
check_rc "load on 3 ranks" 0 $rc
for r in 0 1 2; do has "[rank $r] rank $r: loaded and verified 3 parameters"; done

printf '{"rules": [{"match": "**", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]}' \
  >"$TMPDIR/rows.json"
out=$("$bin" reshard --nproc 2 --in "$dir" --plan "$TMPDIR/rows.json" --out "$TMPDIR/re" 2>&1); rc=$?
check_rc "reshard of a saved directory" 0 $rc
out=$("$bin" launch --nproc 2 -- "$example" load "$TMPDIR/re" 2>&1); rc=$?
check_rc "load the resharded copy on 2 ranks" 0 $rc
has "[rank 1] rank 1: loaded and verified 3 parameters"

mkdir -p "$TMPDIR/foreign" && echo mine >"$TMPDIR/foreign/notes.txt"
out=$("$bin" launch --nproc 2 -- "$example" save "$TMPDIR/foreign" "$TMPDIR/ref2.safetensors" 2>&1); rc=$?
check_rc "save into a directory with a foreign file" 2 $rc
has "[rank 1] save_example: INVALID_ARGUMENT"
has "notes.txt"
[ ! -e "$TMPDIR/foreign/index.json" ] || fail "a failed save left index.json"

[ $failures -eq 0 ] && echo "all save example checks passed"
exit $failures
