#!/usr/bin/env python3
"""Checks that the folders' #include lines follow shardkit's layering (docs/architecture.md).

  tools/check_layering.py FILE...        # the files to check (paths relative to the repo root)
  tools/check_layering.py --root DIR     # every .h/.cc file below DIR

Test files (`*_test.cc`, `*_test.h`, anything under `testdata/`, and the test targets listed in
TEST_SOURCES) may include what they need: a backend's engine tests need the engine. For every other file, the
folder it lives in limits what it may include from the repository's own folders:

  core/base     core/base
  core/tensor   core/base, core/tensor
  core/json     core/base, core/json
  core/os       core/base, core/os
  core/store    core/base, core/os, core/store
  core/comm     core/base, core/os, core/tensor, core/store, core/comm
  core/engine   core/base, core/tensor, core/comm, core/engine, specs
  specs         core/base, core/json, core/tensor/{shape,dtype,device}.h, specs
  backends      anything but core/engine, integration and testing
  testing       anything but backends and integration
  integration   anything but backends/ (programs reach backends through //backends:all), and:
  integration/formats     nothing of integration/checkpoint or integration/cli, no core/comm or
                          core/engine (bytes on disk: no Communicator)
  integration/checkpoint  nothing of integration/cli (the CLI prints what the library returns)
  integration/report      nothing of integration/cli (the CLI and Python both print its text)
  integration/flags       core/base and itself only: every program parses its flags with it
  integration/torch, integration/examples
                          nothing of integration/cli (their flags: integration/flags)
  integration/formats/F   of the other folders of formats/, only the containers every format may
                          build on (output_file, safetensors, pickle, torch_zip); a format (dcp,
                          hf, shard_dir) includes no other format, a container no format.
                          KNOWN_CROSSINGS lists the crossings still there, each with why (none
                          today); no new one may be added.

Prints one line per violation (`file:line: includes "x": reason`) and exits 1 if there are any.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
OWN_FOLDERS = ("core/", "specs/", "backends/", "integration/", "testing/")

# (folder, allowed include prefixes, why). The first folder that prefixes a file's path applies.
RULES = [
    ("core/base/", ["core/base/"], "core/base includes nothing else of shardkit"),
    ("core/tensor/", ["core/base/", "core/tensor/"], "core/tensor builds on core/base only"),
    ("core/json/", ["core/base/", "core/json/"], "core/json builds on core/base only"),
    ("core/os/", ["core/base/", "core/os/"], "core/os builds on core/base only"),
    ("core/store/", ["core/base/", "core/os/", "core/store/"],
     "core/store builds on core/base and core/os only"),
    ("core/comm/", ["core/base/", "core/os/", "core/tensor/", "core/store/", "core/comm/"],
     "core/comm builds on core/base, core/os, core/tensor and core/store only"),
    ("core/engine/", ["core/base/", "core/tensor/", "core/comm/", "core/engine/", "specs/"],
     "the engine talks to ranks through core/comm only"),
    ("core/", [], "every folder of core/ has its own rule"),
    ("integration/flags/", ["core/base/", "integration/flags/"],
     "the flag library builds on core/base only: every program may use it"),
    ("specs/", ["core/base/", "core/json/", "core/tensor/shape.h", "core/tensor/dtype.h",
                "core/tensor/device.h", "specs/"],
     "specs may include core/base, core/json and core/tensor/{shape,dtype,device}.h only"),
]
# (folder, banned include prefixes, why). Every folder that prefixes a file's path applies.
FORBIDDEN = [
    ("backends/", ["core/engine/", "integration/", "testing/"],
     "backends must not include the engine, the CLI or test helpers"),
    ("testing/", ["backends/", "integration/"], "test helpers must not include backends or the CLI"),
    ("integration/formats/", ["integration/checkpoint/", "integration/cli/", "core/comm/",
                              "core/engine/"],
     "formats are bytes on disk: no Communicator, nothing of integration/checkpoint or cli"),
    ("integration/checkpoint/", ["integration/cli/"],
     "the checkpoint library never includes the CLI (the CLI prints what it returns)"),
    ("integration/report/", ["integration/cli/"],
     "report text serves the CLI and Python alike: it never includes the CLI"),
    ("integration/torch/", ["integration/cli/"],
     "the LibTorch adapter programs parse flags with integration/flags, never the CLI"),
    ("integration/examples/", ["integration/cli/"],
     "the examples parse flags with integration/flags, never the CLI"),
    ("integration/", ["backends/"], "programs reach backends through //backends:all only"),
]

FORMATS = "integration/formats/"
# Folders of formats/ that every format may build on: a file writer's rules, the safetensors
# container (a shard directory's rank files and a Hugging Face folder's files are safetensors),
# the pickle machine and torch.save's zip container (DCP's `.metadata` is a pickle, each item of
# its `.distcp` files a torch.save archive).
FORMAT_CONTAINERS = ("output_file", "safetensors", "pickle", "torch_zip")
# (file, included): format-to-format includes that are still there, and why. Shrink, never grow.
KNOWN_CROSSINGS = {}


# Sources of test targets whose names do not end in _test (manual benchmarks run as tests) and of
# testonly suites that backends instantiate.
TEST_SOURCES = {
    "backends/gloo/control_latency_bench.cc",
    "core/engine/engine_test_suite.cc",
    "core/engine/engine_test_suite.h",
    "core/engine/engine_test_suite_errors.cc",
    "core/engine/engine_test_suite_plans.cc",
    "core/engine/engine_test_suite_round_trip.cc",
    "core/engine/engine_test_suite_util.cc",
    "core/engine/engine_test_suite_util.h",
}


def is_test_file(path):
    name = os.path.basename(path)
    return (name.endswith(("_test.cc", "_test.h")) or "testdata" in path.split("/") or
            path in TEST_SOURCES)


def format_folder(path):
    """The folder of formats/ that `path` lies in, or None."""
    return path[len(FORMATS):].split("/", 1)[0] if path.startswith(FORMATS) else None


def format_violation(path, included):
    """Why a file of one formats/ folder may not include `included` of another, or None."""
    own, other = format_folder(path), format_folder(included)
    if own is None or other is None or own == other or other in FORMAT_CONTAINERS:
        return None
    if (path, included) in KNOWN_CROSSINGS:
        return None
    if own in FORMAT_CONTAINERS:
        return f"a container includes no format (formats/{own} -> formats/{other})"
    return f"a format includes no other format (formats/{own} -> formats/{other})"


def violation(path, included):
    """Why `path` may not include `included`, or None."""
    if not included.startswith(OWN_FOLDERS):
        return None  # system and third-party headers
    why = format_violation(path, included)
    if why:
        return why
    for folder, allowed, why in RULES:
        if path.startswith(folder):
            return None if included.startswith(tuple(allowed)) else why
    for folder, banned, why in FORBIDDEN:
        if path.startswith(folder) and included.startswith(tuple(banned)):
            return why
    return None


def check(paths, read):
    problems = []
    for path in sorted(paths):
        if not path.endswith((".h", ".cc")) or is_test_file(path):
            continue
        for number, line in enumerate(read(path).splitlines(), 1):
            match = INCLUDE.match(line)
            why = match and violation(path, match.group(1))
            if why:
                problems.append(f'{path}:{number}: includes "{match.group(1)}": {why}')
    return problems


def main(argv):
    if len(argv) == 3 and argv[1] == "--root":
        root = argv[2]
        paths = [os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root)
                 for f in files]
    elif len(argv) > 1 and not argv[1].startswith("-"):
        root, paths = ".", argv[1:]
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2

    def read(path):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            return f.read()

    problems = check(paths, read)
    for problem in problems:
        print(problem)
    checked = sum(1 for p in paths if p.endswith((".h", ".cc")))
    print(f"check_layering: {checked} files, {len(problems)} violations", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
