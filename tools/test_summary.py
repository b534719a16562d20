#!/usr/bin/env python3
"""Summarises Bazel build-event JSON files: one line per test target and configuration, the tests
that skipped and why, then the line "N passed, N failed, N skipped". Exit 1 if any test failed or
a test target failed to build.

Bazel 4.2.3 has no skipped status: a test that cannot run on this machine (no root, no GPU, no
PyPI client) exits 0 and Bazel says PASSED. Such a test says so in its JUnit XML (the test.xml of
its testResult event): gtest writes <skipped> for each GTEST_SKIP, and the end-to-end tests'
helpers (skip_test/skip in integration/tests/checkpoint_testlib.py, skip_test in sh_test_lib.sh)
write it too. A passed test is counted as skipped when every case of its XML skipped; one where
only some cases skipped is passed (its line says how many skipped).

Targets Bazel did not build in a configuration (incompatible with it: CUDA-only targets without
--config=cuda, Open MPI and LibTorch under the sanitizers) are NOT_BUILT: listed, counted on a line
of their own, not in "N skipped" (they are a choice of configuration, not a test that could not
run; another configuration of the same run builds them)."""
import json
import os
import sys
import urllib.parse
import urllib.request
from xml.etree import ElementTree


def read_cases(uri):
    """[(case name, skip reason or None)] of the JUnit XML at `uri`; [] if it cannot be read."""
    if not uri.startswith("file://"):
        return []
    try:
        root = ElementTree.parse(urllib.request.url2pathname(urllib.parse.urlparse(uri).path))
    except (OSError, ElementTree.ParseError):
        return []
    cases = []
    for case in root.iter("testcase"):
        if case.get("status") == "notrun":  # gtest's DISABLED_ tests
            continue
        skipped = case.find("skipped")
        if skipped is None and case.get("result") != "skipped":
            cases.append((case.get("name", ""), None))
            continue
        message = skipped.get("message", "") if skipped is not None else ""
        # gtest's message starts with "file:line" and a newline; the reason is what follows.
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        if len(lines) > 1 and ":" in lines[0] and lines[0].rsplit(":", 1)[1].isdigit():
            lines = lines[1:]
        cases.append((case.get("name", ""), lines[0] if lines else "skipped"))
    return cases


def summarise(path):
    """Returns {label: (status, [(case, skip reason or None)])} for the test targets in one
    build-event file."""
    kinds, summaries, completed, xmls = {}, {}, {}, {}
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
            elif "testResult" in ident:
                # The last attempt of each run and shard: its test.xml.
                r = ident["testResult"]
                key = (r.get("run", 1), r.get("shard", 1))
                attempt = r.get("attempt", 1)
                runs = xmls.setdefault(r["label"], {})
                if key not in runs or runs[key][0] <= attempt:
                    uri = next((o.get("uri", "") for o in
                                event.get("testResult", {}).get("testActionOutput", [])
                                if o.get("name") == "test.xml"), "")
                    runs[key] = (attempt, uri)
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
        cases = [case for _, uri in sorted(xmls.get(label, {}).values()) for case in
                 read_cases(uri)]
        if label in summaries:
            status = summaries[label]
            if status in ("PASSED", "FLAKY") and cases and all(why for _, why in cases):
                status = "SKIPPED"
        elif completed.get(label) == "SKIPPED":
            status = "NOT_BUILT"
        elif label in completed and completed[label] != "BUILT":
            status = completed[label]
        else:
            status = "NO_STATUS"
        result[label] = (status, cases)
    return result


def reasons(cases):
    """The distinct skip reasons of `cases`, most frequent first, as one line."""
    counts = {}
    for _, why in cases:
        if why:
            counts[why] = counts.get(why, 0) + 1
    ordered = sorted(counts, key=lambda why: -counts[why])
    text = "; ".join(ordered[:3]) + (f"; and {len(ordered) - 3} other reasons"
                                     if len(ordered) > 3 else "")
    return text if len(text) <= 300 else text[:297] + "..."


def main(paths):
    passed = failed = skipped = not_built = 0
    skipped_lines, partial_lines = [], []
    for path in paths:
        config = os.path.splitext(os.path.basename(path))[0]
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            print(f"[{config}] no build events (bazel did not run)")
            failed += 1
            continue
        for label, (status, cases) in sorted(summarise(path).items()):
            n_skipped = sum(1 for _, why in cases if why)
            if status in ("PASSED", "FLAKY") and n_skipped:
                note = f" ({n_skipped} of {len(cases)} cases skipped: {reasons(cases)})"
                partial_lines.append(f"  [{config}] {label}{note}")
                print(f"[{config}] {label} {status}{note}")
            elif status == "SKIPPED":
                skipped_lines.append(f"  [{config}] {label}: {reasons(cases)}")
                print(f"[{config}] {label} SKIPPED: {reasons(cases)}")
            else:
                print(f"[{config}] {label} {status}")
            if status in ("PASSED", "FLAKY"):
                passed += 1
            elif status == "SKIPPED":
                skipped += 1
            elif status == "NOT_BUILT":
                not_built += 1
            else:
                failed += 1
    if not_built:
        print(f"({not_built} not built in that configuration: not counted)")
    if partial_lines:
        print(f"passed with some cases skipped ({len(partial_lines)}):")
        print("\n".join(partial_lines))
    if skipped_lines:
        print(f"skipped: could not run here ({len(skipped_lines)}):")
        print("\n".join(skipped_lines))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
