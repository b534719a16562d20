"""What compare_torch.py's checkpoint benches share (checkpoint mode: checkpoint_compare.py; DCP
mode: dcp_compare.py; budget_sweep.py uses the first two): a command run and timed after a `sync`
(wall seconds, the child's peak RSS), the per-rank summary table `shardkit shard`/`reshard` print,
the durable-copy floor, a job of PyTorch ranks each printing one JSON line, a step's figures over
the repeats, the target lines and the work directory."""
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def parse_rank_table(text):
    """{rank: {column: value}} from the summary table `shardkit shard` (or `reshard`) prints on
    stderr."""
    columns, table = None, {}
    for line in text.splitlines():
        cells = re.sub(r"^\[rank \d+\]\s*", "", line).split()
        if columns is None:
            if cells[:2] == ["rank", "file"] and "peak_rss_mib" in cells:
                columns = cells
            continue
        if len(cells) != len(columns) or not cells[0].isdigit():
            break
        row = dict(zip(columns, cells))
        for key in ("tensors", "bytes", "bytes_read", "old_files"):    # the last two: reshard's
            if key in row:
                row[key] = int(row[key])
        for key in ("peak_rss_mib", "rss_growth_mib"):
            row[key] = float(row[key])
        table[int(cells[0])] = row
    return table


def spawn_timed(cmd, log):
    """Runs cmd with stdout and stderr to the file log: (wall seconds, exit code, child's
    ru_maxrss in MiB)."""
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss / 1024


def run_checked(cmd, log):
    """spawn_timed after a sync; exits with cmd's output when it fails: (wall seconds, child's
    ru_maxrss in MiB)."""
    os.sync()
    wall, code, maxrss = spawn_timed(cmd, log)
    if code != 0:
        with open(log) as f:
            sys.stderr.write(f.read())
        sys.exit(f"compare_torch: exit {code}: {' '.join(cmd)}")
    return wall, maxrss


def time_shard(cmd, out, nproc):
    """One `shardkit shard` or `reshard` run on nproc ranks into out (removed first), after a
    sync: (wall seconds, {rank: peak RSS MiB} from the summary table it prints, the seconds its
    summary says planning took)."""
    shutil.rmtree(out, ignore_errors=True)
    log = out + ".log"
    wall, _ = run_checked(cmd + ["--out", out], log)
    with open(log) as f:
        text = f.read()
    table, planned = parse_rank_table(text), re.search(r"planned in ([0-9.]+) s", text)
    if sorted(table) != list(range(nproc)) or planned is None:
        sys.exit(f"compare_torch: no per-rank summary table or planning time in {log}")
    return wall, {r: row["peak_rss_mib"] for r, row in table.items()}, float(planned.group(1))


def time_floor(ck, work):
    """Wall seconds of `cp CK COPY && sync`, after a sync."""
    copy = os.path.join(work, "copy.safetensors")
    os.sync()
    start = time.perf_counter()
    subprocess.run(["cp", ck, copy], check=True)
    subprocess.run(["sync"], check=True)
    wall = time.perf_counter() - start
    os.remove(copy)
    return wall


def run_ranks(cmds, timeout, what):
    """Starts one process per command (rank R runs cmds[R]) after a sync, each printing JSON
    lines on stdout: (wall seconds with start-up, every line parsed, by "rank"). Exits naming
    what when a process fails or the job runs past timeout seconds."""
    os.sync()
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for cmd in cmds]
    try:
        texts = [p.communicate(timeout=timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        sys.exit(f"compare_torch: {what} ran past {timeout} s")
    wall = time.perf_counter() - start
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"compare_torch: {what}: a rank failed")
    rows = [json.loads(line) for text in texts for line in text.splitlines() if line.strip()]
    return wall, sorted(rows, key=lambda r: r["rank"])


@contextlib.contextmanager
def work_directory(given, prefix):
    """The directory a bench writes in: given (created if needed, kept), or a fresh temporary
    one, removed afterwards."""
    if given:
        os.makedirs(given, exist_ok=True)
        yield os.path.abspath(given)
        return
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Step:
    """One timed step over the repeats: its wall times, each rank's highest peak RSS and, for a
    shard or reshard run, the seconds its summary says planning took."""

    def __init__(self):
        self.walls, self.rss, self.planned = [], {}, []

    def add(self, wall, rss=None, planned=None):
        self.walls.append(wall)
        for r, value in (rss or {}).items():
            self.rss[r] = max(self.rss.get(r, 0.0), value)
        if planned is not None:
            self.planned.append(planned)

    def median(self):
        return statistics.median(self.walls) if self.walls else None

    def median_planned(self):
        return statistics.median(self.planned) if self.planned else None

    def peaks(self):
        return [self.rss[r] for r in sorted(self.rss)]


def step_line(name, step, floor, note=""):
    """One row of a bench's table: name, median wall seconds, over the floor, peak RSS per rank."""
    wall, rss_text = step.median(), " ".join(f"{v:.0f}" for v in step.peaks())
    print(f"{name:<30} {wall:>8.3f} {wall / floor:>8.2f} {rss_text:<32}{note}")


def target(checks, name, value, limit, text):
    checks.append(value <= limit)
    print(f"{name:<4} {text:<52} {value:>9.2f} <= {limit:<8.2f} {'pass' if checks[-1] else 'FAIL'}")


def check(checks, name, ok, text, why=""):
    checks.append(ok)
    print(f"{name:<4} {text:<52} {str(ok):>9}{'':12} {'pass' if ok else ('FAIL ' + why).rstrip()}")


def reported(name, text, value):
    """A figure printed beside the targets, with no target of its own."""
    print(f"{name:<4} {text:<52} {value:>9.2f}    (reported)")
