#!/usr/bin/env python3
"""tools/test_summary.py on a build-event file (testdata/summary_events.json) whose tests passed,
failed, skipped (their test.xml says every case skipped: the Python helpers' XML and gtest's,
DISABLED_ cases aside), passed with some gtest cases skipped, passed on a retry, or were not built
in that configuration: each target's line, the skipped ones listed with their reason, the last line
"N passed, N failed, N skipped", exit 1 when a test failed and 0 otherwise."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = os.path.join(HERE, "test_summary.py")
TESTDATA = os.path.join(HERE, "testdata")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)


def events(name, drop=()):
    """The fixture with its test.xml paths pointing at testdata, written as TMP/`name`.json,
    without the events that mention any label of `drop`."""
    with open(os.path.join(TESTDATA, "summary_events.json")) as f:
        lines = [line.replace("@TESTDATA@", TESTDATA) for line in f
                 if not any(f'"{label}"' in line for label in drop)]
    path = os.path.join(TMP, f"{name}.json")
    with open(path, "w") as f:
        f.writelines(lines)
    return path


def summarise(*paths):
    r = subprocess.run([sys.executable, SUMMARY, *paths], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    return r.returncode, r.stdout.splitlines()


def main():
    code, lines = summarise(events("default"))
    check(code == 1, f"a failed test: exit {code}")
    check(lines[-1] == "3 passed, 1 failed, 2 skipped", f"last line: {lines[-1]!r}")
    expected = [
        "[default] //a:passes PASSED",
        "[default] //a:fails FAILED",
        "[default] //a:skips SKIPPED: creating network namespaces needs root",
        "[default] //a:gtest_all_skipped SKIPPED: NOT_FOUND: redis-server is not installed "
        "(tools/setup)",
        "[default] //a:gtest_some_skipped PASSED (1 of 3 cases skipped: needs two ranks)",
        "[default] //a:retried FLAKY",
        "[default] //a:cuda_only NOT_BUILT",
        "(1 not built in that configuration: not counted)",
        "  [default] //a:skips: creating network namespaces needs root",
        "  [default] //a:gtest_all_skipped: NOT_FOUND: redis-server is not installed "
        "(tools/setup)",
    ]
    for line in expected:
        check(line in lines, f"no line {line!r}")
    check(not any("//a:lib" in line for line in lines), "a library is listed as a test")

    # Two configurations sum up; nothing failed: exit 0.
    code, lines = summarise(events("default", drop=["//a:fails"]),
                            events("asan", drop=["//a:fails", "//a:skips"]))
    check(code == 0, f"nothing failed: exit {code}")
    check(lines[-1] == "6 passed, 0 failed, 3 skipped", f"two configurations: {lines[-1]!r}")
    check("[asan] //a:gtest_all_skipped SKIPPED: NOT_FOUND: redis-server is not installed "
          "(tools/setup)" in lines, "the asan configuration's skip")

    # No build events at all (bazel did not run): a failure.
    empty = os.path.join(TMP, "cuda.json")
    open(empty, "w").close()
    code, lines = summarise(empty)
    check(code == 1 and lines[-1] == "0 passed, 1 failed, 0 skipped",
          f"no events: exit {code}, {lines[-1:]}")

    if failures:
        print(f"{len(failures)} test_summary checks failed")
        return 1
    print("all test_summary checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
