#!/usr/bin/env bash
# The public programs' labels resolve from outside integration/ and keep their output paths:
# integration/shardkit (bazel-bin/integration/shardkit) and the examples.
set -euo pipefail
ws="$TEST_SRCDIR/shardkit"
fail() { echo "FAIL: $*" >&2; exit 1; }
for program in integration/shardkit integration/examples/shard_example \
               integration/examples/save_example; do
  [ -x "$ws/$program" ] || fail "$program is not built at that path"
done
out=$("$ws/integration/shardkit" --version) || fail "shardkit --version exited $?"
[[ "$out" == shardkit* ]] || fail "unexpected --version output: $out"
echo "public_programs_test: 3 programs at their paths; $out"
