# Shared set-up of the end-to-end shell tests of the shardkit binary. Source it first:
#
#   source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
#
# Sets `bin` (the shardkit binary), an empty TMPDIR under $TEST_TMPDIR (so leftovers can be
# checked) and `failures`; defines `fail MESSAGE` and `check_rc NAME EXPECTED ACTUAL`.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check_rc() { [ "$2" = "$3" ] || fail "$1: exit $3, expected $2"; }
