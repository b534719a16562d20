#!/usr/bin/env bash
# What --help says: every command's line whole, a plan example (which spec check accepts) with the
# pattern rules under shard, reshard and spec, flags with their metavariables and defaults; and
# errors about a flag's value name the flag.
source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
has() {  # has LABEL TEXT HAYSTACK
  grep -qF -- "$2" <<<"$3" || fail "$1: no \"$2\" in: $3"
}

top=$("$bin" --help)
has "shardkit --help" "reshard   lay a shard directory out anew for another plan or world size" "$top"
grep -q 'reading only$' <<<"$top" && fail "shardkit --help: the reshard line is cut: $top"

for command in shard reshard "spec"; do
  # shellcheck disable=SC2086
  help=$("$bin" $command --help); check_rc "$command --help" 0 $?
  has "$command --help" "plan (PLAN.json), for example:" "$help"
  has "$command --help" "*   matches any characters within one dotted segment" "$help"
  has "$command --help" "**  matches zero or more whole segments" "$help"
  has "$command --help" "the first rule that matches wins" "$help"
  has "$command --help" "a parameter no rule matches is replicated" "$help"
  # The example, six lines from '  {"src_rank"' to the line ending in ']}', is a valid plan.
  sed -n '/^  {"src_rank"/,/\]}$/p' <<<"$help" >"$TMPDIR/example.json"
  [ "$(wc -l <"$TMPDIR/example.json")" = 6 ] || fail "$command --help: the example is not 6 lines"
  out=$("$bin" spec check "$TMPDIR/example.json" --world 2 2>&1)
  check_rc "$command --help: spec check of the example" 0 $?
  has "$command --help: spec check of the example" '"match":"layers.*.attn.o_proj.weight"' "$out"
done
[ "$("$bin" spec --help)" = "$("$bin" spec check --help)" ] || fail "spec --help differs from spec check --help"

help=$("$bin" shard --help)
for text in "--plan PLAN.json" "--out DIR" "--nproc N" "--src-rank R" \
    "--strategy scatter|broadcast|direct" "--memory-mib M" "(default 512)" "(default 128)" \
    '(default: the plan'"'"'s src_rank, else 0)' '(default: the plan'"'"'s strategy, else scatter)' \
    '(default: $SHARDKIT_BACKEND, else gloo)' '(default: $SHARDKIT_TIMEOUT, else 60)'; do
  has "shard --help" "$text" "$help"
done
grep -q -- '--[a-z-]* VALUE' <<<"$help" && fail "shard --help: a flag without its metavariable: $help"
help=$("$bin" gather --help)
for text in "--in DIR" "--max-shard-size SIZE" "(default: one safetensors file)"; do
  has "gather --help" "$text" "$help"
done
has "launch --help" "--rank-offset K" "$("$bin" launch --help)"
# Every form a command reads or writes is named in its help.
help=$("$bin" inspect --help | tr '\n' ' ' | tr -s ' ')
for text in "a .safetensors file" "*.safetensors.index.json or model folder" "a shard directory" \
    "PyTorch DCP checkpoint folder"; do
  has "inspect --help" "$text" "$help"
done
for text in "--include GLOB" "--exclude GLOB" "--strip-prefix PREFIX" "config.json"; do
  has "gather --help" "$text" "$("$bin" gather --help)"
done
for text in "--include GLOB" "--exclude GLOB" "--allow-replicated-only"; do
  has "reshard --help" "$text" "$("$bin" reshard --help)"
done
has "shard --help" "--allow-replicated-only" "$("$bin" shard --help)"
has "demo --help" "--nproc N" "$("$bin" demo --help)"
# Within 100 columns, but for the example's JSON lines.
for command in launch shard reshard gather inspect spec demo bench; do
  long=$("$bin" $command --help | grep -v '"match"' | awk 'length > 100')
  [ -z "$long" ] || fail "$command --help: lines over 100 columns: $long"
done

# Errors about a flag's value name the flag.
err=$("$bin" shard --plan p.json --checkpoint c.safetensors --out o --strategy x 2>&1)
check_rc "shard --strategy x" 2 $?
[ "$err" = 'shardkit shard: --strategy: expected "scatter", "broadcast" or "direct", got "x"' ] ||
  fail "shard --strategy x: $err"
err=$("$bin" bench --nproc 1 --mib 1 --strategy x 2>&1); check_rc "bench --strategy x" 2 $?
has "bench --strategy x" "shardkit bench: --strategy: unknown strategy \"x\"" "$err"
err=$("$bin" bench --nproc 1 --mib 1 --dtype x 2>&1); check_rc "bench --dtype x" 2 $?
has "bench --dtype x" "shardkit bench: --dtype: unknown dtype \"x\"" "$err"
# --timeout is checked once for every command that takes it, with one message.
for args in "launch --nproc 1 --timeout 0 -- true" \
    "shard --plan p.json --checkpoint c.safetensors --out o --timeout 0" \
    "reshard --in d --plan p.json --out o --timeout 0" "demo --timeout 0" \
    "bench --nproc 1 --mib 1 --timeout 0"; do
  # shellcheck disable=SC2086
  err=$("$bin" $args 2>&1); check_rc "$args" 2 $?
  [ "$err" = "shardkit ${args%% *}: --timeout must be > 0 seconds, got 0" ] || fail "$args: $err"
done
err=$("$bin" launch --nproc 1 --store ftp://x -- true 2>&1); check_rc "launch --store ftp://x" 2 $?
has "launch --store ftp://x" "shardkit launch: --store: store URL \"ftp://x\"" "$err"

[ $failures -eq 0 ] && echo "all help checks passed"
exit $failures
