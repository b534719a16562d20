# Shared set-up of the end-to-end shell tests of the shardkit binary. Source it first:
#
#   source "$TEST_SRCDIR/shardkit/integration/tests/sh_test_lib.sh"
#
# Sets `bin` (the shardkit binary), an empty TMPDIR under $TEST_TMPDIR (so leftovers can be
# checked) and `failures`; defines `fail MESSAGE`, `check_rc NAME EXPECTED ACTUAL` and
# `skip_test REASON` (the test cannot run on this machine: records it as skipped, exits 0).
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check_rc() { [ "$2" = "$3" ] || fail "$1: exit $3, expected $2"; }
# Bazel 4.2.3 has no skipped status: the skip goes to $XML_OUTPUT_FILE as a <skipped> case, which
# tools/test_summary.py counts as skipped (checkpoint_testlib.skip_test is the Python twin).
skip_test() {
  echo "skipped: $*"
  local reason
  reason=$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$*")
  local name="${TEST_TARGET:-$0}"
  [ -z "${XML_OUTPUT_FILE:-}" ] || cat >"$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="$name" tests="1" skipped="1">
<testcase name="$name"><skipped message="$reason"/></testcase>
</testsuite></testsuites>
EOF
  exit 0
}
