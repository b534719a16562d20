#!/usr/bin/env bash
# //integration/torch:tp_mlp_train resolves from outside integration/ and runs (--help).
set -euo pipefail
bin="$TEST_SRCDIR/shardkit/integration/torch/tp_mlp_train"
[ -x "$bin" ] || { echo "FAIL: no $bin" >&2; exit 1; }
out=$("$bin" --help 2>&1) || { echo "FAIL: --help exited $?: $out" >&2; exit 1; }
[[ "$out" == *tp_mlp_train* ]] || { echo "FAIL: unexpected --help output: $out" >&2; exit 1; }
echo "tp_mlp_train_label_test: --help works"
