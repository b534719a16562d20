#!/usr/bin/env bash
# End-to-end checks of the shardkit binary's top-level contract: --help, exit codes, stderr.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
failures=0
check() {  # check NAME EXPECTED_RC ACTUAL_RC
  if [ "$2" != "$3" ]; then echo "FAIL: $1: exit $3, expected $2"; failures=$((failures + 1)); fi
}
out=$("$bin" --help); check "--help" 0 $?
grep -q '^usage: shardkit COMMAND' <<<"$out" || { echo "FAIL: --help text"; failures=$((failures+1)); }
grep -q 'spec ' <<<"$out" || { echo "FAIL: --help lists commands"; failures=$((failures+1)); }
"$bin" >/dev/null 2>&1; check "no command" 2 $?
err=$("$bin" frobnicate 2>&1 >/dev/null); check "unknown command" 2 $?
head -1 <<<"$err" | grep -q 'unknown command "frobnicate"' || { echo "FAIL: unknown command message"; failures=$((failures+1)); }
[ $failures -eq 0 ] && echo "all CLI checks passed"
exit $failures
