"""Helpers for the end-to-end tests of the `shardkit` binary (integration/tests, integration/torch):
checks and the test's result (passed, failed, skipped) as JUnit XML, safetensors files written and
read in plain Python, N-d slicing of row-major bytes, running the real binary, rank processes
watched from outside.

A test calls check() for every assertion and ends with finish(NAME). A part that cannot run on this
machine (no root, no PyPI client, mknod refused) calls skip(PART, REASON) and the test goes on; a
test none of which can run calls skip_test(NAME, REASON), which exits 0. Bazel 4.2.3 has no skipped
status, so the result goes to $XML_OUTPUT_FILE (Bazel keeps it as the test's test.xml):
tools/test_summary.py counts a test whose every part skipped as skipped, not passed."""

import json
import os
import re
import stat
import struct
import subprocess
import sys
import time
from xml.etree import ElementTree

BIN = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit/integration/shardkit")
TMP = os.environ.get("TEST_TMPDIR", ".")
ITEM_SIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I16": 2, "I32": 4,
             "I64": 8, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "C64": 8, "F8_E4M3": 1,
             "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1}

failures = []
checks = 0
# The test's parts so far, for $XML_OUTPUT_FILE: (name, "passed" | "failed" | "skipped", message).
cases = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message, flush=True)


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        fail(message)
    return condition


def write_results():
    """Writes `cases` to $XML_OUTPUT_FILE (where Bazel set it), one <testcase> each."""
    path = os.environ.get("XML_OUTPUT_FILE")
    if not path:
        return
    target = os.environ.get("TEST_TARGET", os.path.basename(sys.argv[0]))
    suite = ElementTree.Element("testsuite", name=target, tests=str(len(cases)),
                                failures=str(sum(kind == "failed" for _, kind, _ in cases)),
                                skipped=str(sum(kind == "skipped" for _, kind, _ in cases)))
    for name, kind, message in cases:
        case = ElementTree.SubElement(suite, "testcase", name=name, classname=target)
        if kind != "passed":
            ElementTree.SubElement(case, "failure" if kind == "failed" else "skipped",
                                   message=message)
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.ElementTree(root).write(path, encoding="UTF-8", xml_declaration=True)


def skip(part, reason):
    """Records that `part` of this test did not run on this machine, and why; the test goes on."""
    print(f"skipped: {part}: {reason}", flush=True)
    cases.append((part, "skipped", reason))
    write_results()


def skip_test(name, reason):
    """The whole test cannot run on this machine: says why, records it as skipped, exits 0."""
    skip(name, reason)
    sys.exit(0)


def finish(name):
    """Ends the checks of `name`: exit 1 if any failed, or if none ran (a test that asserted
    nothing must not pass)."""
    if not failures and checks == 0:
        fail(f"{name}: no check ran")
    cases.append((name, "failed" if failures else "passed",
                  "; ".join(failures) if failures else f"{checks} checks"))
    write_results()
    if failures:
        print(f"{len(failures)} {name} checks failed")
        sys.exit(1)
    print(f"all {checks} {name} checks passed")


def tmp_path(*parts):
    """A path under this test's temporary directory ($TEST_TMPDIR)."""
    return os.path.join(TMP, *parts)


def write_json(name, value):
    """Writes `value` (a str as it is, anything else as JSON) to tmp_path(name); returns the path."""
    with open(tmp_path(name), "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return tmp_path(name)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_safetensors(path, tensors, metadata=None, order=None):
    """tensors: name -> (dtype, shape, data bytes); data laid out in `order` (default: names)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name in order or sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def write_big_checkpoint(path, plan_path, dim):
    """The fault tests' 64 MiB checkpoint: float32 "w" [4096, 4096] and a small "b"; the plan at
    `plan_path` cuts "w" on `dim` over every rank and replicates "b"."""
    blob = bytes(range(256)) * (64 * (1 << 20) // 256)
    write_safetensors(path, {"w": ("F32", [4096, 4096], blob), "b": ("F32", [4], b"\1" * 16)})
    with open(plan_path, "w") as f:
        f.write('{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": %d, '
                '"placements": {"ranks": "all"}}}]}' % dim)


def read_safetensors(path):
    """Returns (raw header text, metadata or None, {name: (dtype, shape, data bytes)})."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    text = raw[8:8 + length].decode()
    header = json.loads(text)
    data = raw[8 + length:]
    metadata = header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[begin:end])
    return text, metadata, tensors


def extract(blob, shape, item, offsets, sizes):
    """The bytes of the box [offsets, offsets + sizes) of a row-major tensor."""
    if not shape:
        return blob
    if 0 in sizes:
        return b""
    row = numel(shape[1:]) * item
    out = b""
    for i in range(offsets[0], offsets[0] + sizes[0]):
        out += extract(blob[i * row:(i + 1) * row], shape[1:], item, offsets[1:], sizes[1:])
    return out


def snapshot(path):
    """What is at `path`, not following a final link, recursively for a directory: ("file",
    bytes), ("link", target), ("dir", {name: snapshot}), ("special", type bits, device), or None.
    Equal snapshots mean nothing there was changed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", {name: snapshot(os.path.join(path, name)) for name in os.listdir(path)})
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            return ("file", f.read())
    return ("special", stat.S_IFMT(st.st_mode), st.st_rdev)


def run(args, timeout=60, **kwargs):
    """Runs shardkit with `args`; returns the CompletedProcess (text output)."""
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout, **kwargs)


def rerun_with_clients(script, flag, part, modules=("safetensors", "numpy", "huggingface_hub")):
    """Runs `script` again under SHARDKIT_TEST_PYTHON (the .venv with PyPI's safetensors, numpy,
    huggingface_hub and torch) with the environment variable `flag` set to 1, its parts added to
    this test's: its exit status. Without such a Python, or one lacking `modules`, `part` is
    recorded as skipped: 0."""
    python = os.environ.get("SHARDKIT_TEST_PYTHON")
    if not python or subprocess.run([python, "-c", "import " + ", ".join(modules)],
                                    capture_output=True).returncode != 0:
        skip(part, f"no SHARDKIT_TEST_PYTHON with {', '.join(modules)} (run ./tools/test, which "
             "makes .venv with tools/setup --test-venv)")
        return 0
    results = os.path.join(TMP, f"{flag}.xml")
    env = dict(os.environ, **{flag: "1", "XML_OUTPUT_FILE": results})
    code = subprocess.run([python, os.path.abspath(script)], env=env).returncode
    try:
        for case in ElementTree.parse(results).iter("testcase"):
            outcome = next(iter(case), None)
            cases.append((case.get("name"), "passed" if outcome is None else
                          "skipped" if outcome.tag == "skipped" else "failed",
                          "" if outcome is None else outcome.get("message", "")))
    except (OSError, ElementTree.ParseError) as e:
        cases.append((part, "failed", f"exit {code}, no results ({e})"))
        code = code or 1
    write_results()
    return code


def expected_rank_metadata(index, rank):
    """Rank `rank`'s __metadata__ as shard, reshard and SaveShards write it, from index.json:
    the checkpoint's (index.json's "metadata") with DCP_SHARDING_INFO, every tensor of the file
    with its offsets (replicated: zeros) but NAME#K ones, for torch's HuggingFaceStorageReader — parsed, as
    rank_metadata() gives it; none in a file that holds no tensor."""
    want = dict(index["metadata"])
    want.pop("DCP_SHARDING_INFO", None)  # a checkpoint's own is in index.json, not in rank files
    mine = [shard for entry in index["parameters"].values() for shard in entry["shards"]
            if shard["rank"] == rank]
    if mine:  # NAME#K tensors left out: torch's reader then refuses the directory
        want["DCP_SHARDING_INFO"] = {shard["tensor"]: {"saved_offsets": shard["offsets"]}
                                     for shard in mine if "#" not in shard["tensor"]}
    return want


def rank_metadata(metadata):
    """A rank file's __metadata__ (None: {}) with DCP_SHARDING_INFO parsed."""
    out = dict(metadata or {})
    if "DCP_SHARDING_INFO" in out:
        out["DCP_SHARDING_INFO"] = json.loads(out["DCP_SHARDING_INFO"])
    return out


def same_rank_files(out, reference, world, label):
    """Checks that rank-00000.safetensors … of `out` are byte-identical to `reference`'s."""
    for k in range(world):
        name = f"rank-{k:05d}.safetensors"
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(reference, name), "rb") as b:
            check(a.read() == b.read(), f"{label}: {name} differs from {reference}'s")


def same_directories(out, reference, world, label):
    """Checks that shard directory `out` holds the files of `reference`: the same names,
    byte-identical rank files, an equivalent index.json. Returns whether they matched."""
    before = len(failures)
    check(sorted(os.listdir(out)) == sorted(os.listdir(reference)),
          f"{label}: files {sorted(os.listdir(out))} vs {sorted(os.listdir(reference))}")
    same_rank_files(out, reference, world, label)
    with open(os.path.join(reference, "index.json")) as a, \
            open(os.path.join(out, "index.json")) as b:
        check(json.load(a) == json.load(b), f"{label}: index.json differs")
    return len(failures) == before


def ranks_named(text):
    """The ranks FormatRanks named: "rank 3" -> [3], "ranks 0-2, 5" -> [0, 1, 2, 5]; else None."""
    m = re.fullmatch(r"ranks? ((?:\d+(?:-\d+)?)(?:, \d+(?:-\d+)?)*)", text)
    if not m:
        return None
    ranks = []
    for part in m.group(1).split(", "):
        first, _, last = part.partition("-")
        ranks.extend(range(int(first), int(last or first) + 1))
    return ranks


def first_lines_per_rank(stderr, world):
    """rank -> the first line that rank wrote to stderr under a launcher ("[rank R] " removed).
    A line a relaunching command (`shard --nproc N`) printed once for several ranks,
    "ranks 0-2: LINE", counts as LINE for each of them."""
    firsts = {}
    for line in stderr.splitlines():
        named = None
        if line.startswith("[rank "):
            rank, _, rest = line[len("[rank "):].partition("] ")
            named, line = ([int(rank)] if rank.isdigit() else None), rest
        elif ": " in line:
            head, _, rest = line.partition(": ")
            named, line = ranks_named(head), rest
        for rank in named or []:
            if rank < world and rank not in firsts:
                firsts[rank] = line
    return firsts


def expect_every_rank(label, r, world, *texts, code=2):
    """`r`, a run of `world` ranks (one process when `world` is 1), exited `code`, and every rank's
    first stderr line is the same and holds each of `texts`. Returns rank 0's first line."""
    if world > 1:
        firsts = first_lines_per_rank(r.stderr, world)
    else:
        firsts = {0: r.stderr.splitlines()[0]} if r.stderr else {}
    print(f"{label}: exit {r.returncode}: {firsts.get(0)}", flush=True)
    check(r.returncode == code, f"{label}: exit {r.returncode}, expected {code}: {r.stderr}")
    check(len(firsts) == world and len(set(firsts.values())) == 1 and
          all(t in firsts.get(0, "") for t in texts),
          f"{label}: first lines differ or lack {texts}: {firsts}")
    return firsts.get(0, "")


def cells(line):
    """A table line split into cells (columns are separated by two or more spaces)."""
    return re.split(r"\s{2,}", line.strip())


# Rank processes, watched from outside: /proc io counters, pid files, liveness.
def io_counter(pid, field):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                key, value = line.split(":")
                if key == field:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def launch_recording_pids(pids, command, nproc=3, launch_flags=("--timeout", "20")):
    """Starts `shardkit launch --nproc NPROC LAUNCH_FLAGS -- sh -c 'echo $$ > PIDS/$SHARDKIT_RANK;
    exec shardkit COMMAND'` (COMMAND: the rest of a shell command line) with its output piped, and
    returns the Popen; read_pid(PIDS/R) is then rank R's pid."""
    os.makedirs(pids)
    script = f'echo $$ > "{pids}/$SHARDKIT_RANK"; exec "{BIN}" {command}'
    return subprocess.Popen([BIN, "launch", "--nproc", str(nproc), *launch_flags, "--", "sh", "-c",
                             script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_pid(path, deadline):
    """The pid a rank wrote to `path` (`echo $$`), once the whole line is there."""
    while time.time() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return int(text)
        except OSError:
            pass
        time.sleep(0.001)
    raise RuntimeError(f"no pid in {path}")


def descendants(pid):
    """The pids of `pid`'s descendants, from /proc/PID/task/*/children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def io_grew(field, threshold):
    """A kill condition: the victim's /proc io counter `field` grew by `threshold` bytes."""
    base = {}

    def reached(pid, out):
        value = io_counter(pid, field)
        if value is None:
            return False
        base.setdefault(pid, value)
        return value - base[pid] >= threshold
    return reached


def new_dirs_beside(out):
    """The directories a run writes beside `out` when it replaces an earlier output there
    (PARENT/.NAME.shardkit-new-HEX): the new output until its commit swaps it in."""
    parent, name = os.path.split(os.path.abspath(out))
    prefix = f".{name}.shardkit-new-"
    return [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(prefix)]


def writing_file(pid, out):
    """A kill condition: the victim has created its shard file and is writing it (not renamed),
    in `out` or in the directory beside it that replaces an earlier output."""
    dirs = ([out] if os.path.isdir(out) else []) + new_dirs_beside(out)
    for d in dirs:
        try:
            if any(name.endswith(f".tmp.{pid}") for name in os.listdir(d)):
                return True
        except OSError:
            pass
    return False


def free_port():
    """A TCP port on 127.0.0.1, free now, below the kernel's ephemeral range: no other process's
    connecting or port-0 socket can take it before the caller binds it. (A port from bind(0) is
    handed out again at once, and tests running side by side raced for it.)"""
    import random
    import socket
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free TCP port below the ephemeral range")


if __name__ == "__main__" and sys.argv[1:] == ["free_port"]:
    print(free_port())
