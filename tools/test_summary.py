#!/usr/bin/env python3
"""Summarises Bazel build-event JSON files: one line per test target and configuration, then
"N passed, N failed" (skipped targets listed, not counted). Exit 1 if any test failed or a test
target failed to build."""
import json
import os
import sys


def summarise(path):
    """Returns {label: status} for the test targets in one build-event file."""
    kinds, summaries, completed = {}, {}, {}
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            ident = event.get("id", {})
            if "targetConfigured" in ident:
                kinds[ident["targetConfigured"]["label"]] = (
                    event.get("configured", {}).get("targetKind", ""))
            elif "testSummary" in ident:
                summaries[ident["testSummary"]["label"]] = (
                    event.get("testSummary", {}).get("overallStatus", "NO_STATUS"))
            elif "targetCompleted" in ident:
                label = ident["targetCompleted"]["label"]
                if "aborted" in event:
                    completed[label] = event["aborted"].get("reason", "ABORTED")
                else:
                    ok = event.get("completed", {}).get("success", False)
                    completed[label] = "BUILT" if ok else "FAILED_TO_BUILD"
    result = {}
    for label, kind in kinds.items():
        if not kind.endswith("_test rule"):
            continue
        if label in summaries:
            result[label] = summaries[label]
        elif completed.get(label) == "SKIPPED":
            result[label] = "SKIPPED"
        elif label in completed and completed[label] != "BUILT":
            result[label] = completed[label]
        else:
            result[label] = "NO_STATUS"
    return result


def main(paths):
    passed = failed = skipped = 0
    for path in paths:
        config = os.path.splitext(os.path.basename(path))[0]
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            print(f"[{config}] no build events (bazel did not run)")
            failed += 1
            continue
        for label, status in sorted(summarise(path).items()):
            print(f"[{config}] {label} {status}")
            if status in ("PASSED", "FLAKY"):
                passed += 1
            elif status == "SKIPPED":
                skipped += 1
            else:
                failed += 1
    if skipped:
        print(f"({skipped} skipped: not built in that configuration)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
