"""The DCP mode of compare_torch.py (issue 32's targets D1-D3): shardkit's PyTorch DCP forms beside
torch 2.x's own way and the durable-copy floor, in one run (torch's side in dcp_torch.py, run by
--python; the checkpoint and the comparisons in checkpoint_files.py). A manual benchmark, not a
test:

  integration/bench/compare_torch.py --dcp-mode --shardkit bazel-bin/integration/shardkit \
      [--python .venv/bin/python] [--ck-mib 2048] [--nproc 4] [--memory-mib 512] [--repeats 1] \
      [--workdir DIR]

The checkpoint: ck_mib/64 tensors "w000"... of [4096, 4096] F32 in WORKDIR/hf/model.safetensors
(a Hugging Face directory of one file), read once to warm the page cache. Every timed step starts
after a `sync`; with --repeats R each runs R times (medians, highest peak RSS). In each repeat:
- floor: `cp model.safetensors COPY && sync`;
- D2, Hugging Face -> DCP on --nproc ranks, chunk dim 0. torch: `dcp.load` with
  `HuggingFaceStorageReader` into Shard(0) DTensors + `dcp.save` into WORKDIR/torch-dcp, which is
  D1's and D3's input ("TORCH_DCP"). shardkit: `shard --strategy direct --format dcp`; its output
  checked by `shardkit gather` into one file, compared tensor for tensor with the checkpoint;
- D1, DCP -> Hugging Face. shardkit: `gather --in TORCH_DCP --max-shard-size 5GB`; torch:
  `dcp_to_torch_save` + `torch.load` (mmap) + safetensors `save_file`, fsynced; both outputs
  compared tensor for tensor with the checkpoint (shardkit's, read from TORCH_DCP, is also the
  check of torch's D2 output);
- D3, TORCH_DCP (--nproc ranks, dim 0) -> DCP on 3 ranks chunked on dim 1. shardkit: `reshard
  --format dcp --nproc 3`; torch: 3 ranks `dcp.load` into Shard(1) DTensors + `dcp.save`; both
  outputs checked as D2's.
Without a torch in --python (it must import torch.distributed.checkpoint's HF reader and
safetensors) the torch steps are skipped, said so, and D1 and D3 read shardkit's D2 output.
shardkit's peak RSS per rank comes from the summary table shard and reshard print, gather's from
wait4; torch's is each process's VmHWM (torch's import included). torch's time is reported twice:
inside the job (rank 0, barrier to barrier: loading and saving, no start-up) and with start-up.
Targets (M = --memory-mib, default 512, given to every shardkit command; floor as above):
- D1: gather wall <= 1.6x floor, its peak RSS <= M + 160 MiB;
- D2: shard --strategy direct --format dcp wall <= 1.0x floor;
- D3: reshard --format dcp wall <= 1.5x D2's shardkit wall of the same run.
Prints a table, the targets and one JSON line last; exits 1 only if an output is wrong (a missed
target is reported, not an error). WORKDIR defaults to a fresh temporary directory, removed
afterwards; a given --workdir keeps the checkpoint, the plans, TORCH_DCP and each step's .log
(each checked output is removed once checked: the outputs would need 4x the checkpoint's disk).
"""
import json
import os
import shutil
import sys
import time

from bench_common import (Step, check, reported, run_checked, run_ranks, step_line, target,
                          time_floor, time_shard, work_directory)
from checkpoint_compare import CK_PLAN, RESHARD_PLAN, RSS_SLACK_MIB
from checkpoint_files import (CK_COLS, CK_ROWS, read_through, same_hf_tensors, same_tensors,
                              write_checkpoint)
from torch_fix import torch_importable

DCP_TORCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dcp_torch.py")
TORCH_CHECK = ("import safetensors, torch.distributed.checkpoint as d; "
               "d.HuggingFaceStorageReader; from torch.distributed.tensor import empty")
HF_SHARD_SIZE = "5GB"                         # D1: gather --max-shard-size
RESHARD_NPROC = 3                             # D3: the new world size, chunk dim 1
TARGETS = {"d1": 1.6, "d2": 1.0, "d3": 1.5}   # D1, D2: x floor; D3: x D2's shardkit wall
# Every timed step, in the order each repeat runs them ("_wall": torch's job with start-up).
STEP_NAMES = ("floor", "d2_torch", "d2_torch_wall", "d2", "d1", "d1_torch", "d1_torch_wall",
              "d1_torch_to_pt", "d3", "d3_torch", "d3_torch_wall")


def dcp_mode(args):
    if args.ck_mib < 64 or args.ck_mib % 64:
        sys.exit("compare_torch: --ck-mib must be a positive multiple of 64")
    have_torch = torch_importable(args.python, TORCH_CHECK)
    if not have_torch:
        print(f"compare_torch: torch skipped: `{args.python}` cannot import torch 2.x's DCP "
              "HF reader and safetensors (tools/setup --test-venv); D1 and D3 read shardkit's "
              "D2 output", file=sys.stderr)
    with work_directory(args.workdir, "compare_torch-dcp-") as work:
        return dcp_bench(args, work, have_torch)


def dcp_bench(args, work, have_torch):
    ck, plans, warm = prepare(args, work)
    steps, outputs = {name: Step() for name in STEP_NAMES}, {}
    for attempt in range(args.repeats):
        run_repeat(args, work, ck, plans, have_torch, steps, outputs, attempt)
    print_table(args, steps)
    passed = print_targets(args, steps, outputs)
    print(json.dumps(result_json(args, warm, steps, outputs, passed)))
    return 0 if all(ok for ok, _ in outputs.values()) else 1   # a missed target is no error


def prepare(args, work):
    """Writes the plans and the checkpoint (WORKDIR/hf/model.safetensors), then warms the page
    cache: (checkpoint, (plan dim 0, plan dim 1), seconds the warm read took)."""
    count = args.ck_mib // 64
    os.makedirs(os.path.join(work, "hf"), exist_ok=True)
    ck = os.path.join(work, "hf", "model.safetensors")
    plans = (os.path.join(work, "plan-dim0.json"), os.path.join(work, "plan-dim1.json"))
    for path, content in zip(plans, (CK_PLAN, RESHARD_PLAN)):
        with open(path, "w") as f:
            json.dump(content, f)
    start = time.perf_counter()
    write_checkpoint(ck, count)
    print(f"checkpoint: {count} x [{CK_ROWS}, {CK_COLS}] F32 = {os.path.getsize(ck) / 2**20:.1f} "
          f"MiB in {work}, written in {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    read_through(ck)
    warm = time.perf_counter() - start
    print(f"warm read: {warm:.2f} s ({os.path.getsize(ck) / warm / 1e9:.1f} GB/s)", flush=True)
    return ck, plans, warm


def run_repeat(args, work, ck, plans, have_torch, steps, outputs, attempt):
    """One repeat of every step, each output checked (outputs: {name: (ok, why)}, ANDed over the
    repeats) and removed."""
    steps["floor"].add(time_floor(ck, work))
    say(attempt, "floor (cp + sync)", steps["floor"])
    torch_dcp, d2_out = os.path.join(work, "torch-dcp"), os.path.join(work, "d2-dcp")
    if have_torch:
        time_torch(args, work, attempt, steps, "d2_torch",
                   ["hf-to-dcp", "--src", os.path.dirname(ck), "--out", torch_dcp], args.nproc)
    flags = ["--memory-mib", str(args.memory_mib)]
    steps["d2"].add(*time_shard([args.shardkit, "shard", "--strategy", "direct", "--format", "dcp",
                                 "--nproc", str(args.nproc), "--plan", plans[0], *flags,
                                 "--checkpoint", ck], d2_out, args.nproc))
    say(attempt, "D2 shard --strategy direct --format dcp", steps["d2"])
    record(outputs, "d2", gathered_equal(args, work, d2_out, ck))
    source = torch_dcp if have_torch else d2_out
    time_d1(args, work, ck, source, attempt, steps, outputs, have_torch)
    if source != d2_out:
        shutil.rmtree(d2_out)
    d3_out = os.path.join(work, "d3-dcp")
    steps["d3"].add(*time_shard([args.shardkit, "reshard", "--format", "dcp", "--nproc",
                                 str(RESHARD_NPROC), "--plan", plans[1], *flags, "--in", source],
                                d3_out, RESHARD_NPROC))
    say(attempt, f"D3 reshard --format dcp {args.nproc} -> {RESHARD_NPROC} ranks", steps["d3"])
    record(outputs, "d3", gathered_equal(args, work, d3_out, ck))
    shutil.rmtree(d3_out)
    if have_torch:
        d3_torch = os.path.join(work, "d3-torch")
        time_torch(args, work, attempt, steps, "d3_torch",
                   ["reshard", "--dim", "1", "--src", source, "--out", d3_torch], RESHARD_NPROC)
        record(outputs, "d3_torch", gathered_equal(args, work, d3_torch, ck))
        shutil.rmtree(d3_torch)
    if source == d2_out:
        shutil.rmtree(d2_out)


def time_d1(args, work, ck, source, attempt, steps, outputs, have_torch):
    """D1: shardkit's gather of source to Hugging Face files, then torch's way; both checked."""
    out = os.path.join(work, "d1-hf")
    shutil.rmtree(out, ignore_errors=True)
    wall, maxrss = run_checked([args.shardkit, "gather", "--in", source, "--out", out,
                                "--max-shard-size", HF_SHARD_SIZE, "--memory-mib",
                                str(args.memory_mib)], out + ".log")
    steps["d1"].add(wall, {0: maxrss})
    say(attempt, f"D1 gather --max-shard-size {HF_SHARD_SIZE}", steps["d1"])
    record(outputs, "d1", same_hf_tensors(out, ck)[:2])
    if have_torch:        # D1 read torch's D2 output: the same check holds for that
        record(outputs, "d2_torch", outputs["d1"])
    shutil.rmtree(out)
    if have_torch:
        out = os.path.join(work, "d1-torch")
        shutil.rmtree(out, ignore_errors=True)
        rows = time_torch(args, work, attempt, steps, "d1_torch",
                          ["dcp-to-hf", "--src", source, "--out", out], 1)
        steps["d1_torch_to_pt"].add(rows[0]["to_torch_save_s"])
        os.remove(os.path.join(out, "model.pt"))
        record(outputs, "d1_torch", same_hf_tensors(out, ck)[:2])
        shutil.rmtree(out)


def time_torch(args, work, attempt, steps, name, step_args, nproc):
    """One torch job of dcp_torch.py on nproc processes into steps[name] (rank 0's time in the
    job, every rank's peak RSS) and steps[name + "_wall"]: its rows."""
    store = os.path.join(work, f"torch-store-{name}-{attempt}")
    dest = step_args[step_args.index("--out") + 1]
    shutil.rmtree(dest, ignore_errors=True)
    cmds = [[args.python, DCP_TORCH, *step_args, "--rank", str(r), "--world", str(nproc),
             "--store", store] for r in range(nproc)]
    wall, rows = run_ranks(cmds, args.timeout, f"the PyTorch job {step_args[0]}")
    if os.path.exists(store):
        os.remove(store)
    steps[name].add(rows[0]["in_job_s"], {row["rank"]: row["peak_rss_mib"] for row in rows})
    steps[name + "_wall"].add(wall)
    baselines = " ".join(f"{row['baseline_rss_mib']:.0f}" for row in rows)
    print(f"[{attempt}] torch {step_args[0]}: {rows[0]['in_job_s']:.3f} s in the job, "
          f"{wall:.3f} s wall; RSS before the timing (torch imported) {baselines} MiB",
          flush=True)
    return rows


def gathered_equal(args, work, directory, ck):
    """Whether `shardkit gather` of directory into one file holds exactly ck's tensors: (ok,
    why)."""
    out = os.path.join(work, "check.safetensors")
    run_checked([args.shardkit, "gather", "--in", directory, "--out", out],
                os.path.join(work, "check.log"))
    result = same_tensors(out, ck)
    os.remove(out)
    return result


def record(outputs, name, result):
    ok, why = result
    old_ok, old_why = outputs.get(name, (True, ""))
    outputs[name] = (old_ok and ok, old_why or why)


def say(attempt, text, step):
    print(f"[{attempt}] {text}: {step.walls[-1]:.3f} s", flush=True)


def print_table(args, steps):
    floor = steps["floor"].median()
    print()
    print(f"{args.nproc} ranks, {args.ck_mib // 64} x [{CK_ROWS}, {CK_COLS}] F32 ({args.ck_mib} "
          f"MiB), M = {args.memory_mib}; {args.repeats} repeat(s), medians")
    print(f"{'run':<30} {'wall_s':>8} {'x floor':>8} {'peak RSS MiB per rank':<32}")
    step_line("floor: cp + sync", steps["floor"], floor)
    rows = (("D2 shardkit shard direct", "d2", "d2_torch", "D2 torch HF reader + save"),
            ("D1 shardkit gather 5GB", "d1", "d1_torch", "D1 torch to .pt + save_file"),
            (f"D3 shardkit reshard {args.nproc}->{RESHARD_NPROC}", "d3", "d3_torch",
             "D3 torch load + save"))
    for label, name, torch_name, torch_label in rows:
        step_line(label, steps[name], floor)
        if steps[torch_name].walls:
            step_line(f"{torch_label}", steps[torch_name], floor, "  in the job")
            step_line("  with start-up", steps[torch_name + "_wall"], floor)
    if not steps["d2_torch"].walls:
        print(f"{'torch':<30} skipped: `{args.python}` has no torch DCP")


def print_targets(args, steps, outputs):
    """Prints D1-D3 with pass/fail and the outputs' checks, the ratios to torch reported: whether
    every one passed."""
    floor, d1, d2, d3 = (steps[n].median() for n in ("floor", "d1", "d2", "d3"))
    checks = []
    print()
    target(checks, "D1", d1 / floor, TARGETS["d1"],
           f"gather --max-shard-size {HF_SHARD_SIZE} / floor")
    target(checks, "D1", max(steps["d1"].peaks()), args.memory_mib + RSS_SLACK_MIB,
           "gather: peak RSS MiB (M + 160)")
    target(checks, "D2", d2 / floor, TARGETS["d2"], "shard --strategy direct --format dcp / floor")
    reported("D2", "shard direct dcp: max rank peak RSS MiB", max(steps["d2"].peaks()))
    target(checks, "D3", d3 / d2, TARGETS["d3"], f"reshard --format dcp to {RESHARD_NPROC} / D2")
    reported("D3", "reshard: max rank peak RSS MiB", max(steps["d3"].peaks()))
    reported("D3", "reshard / floor", d3 / floor)
    for name, run in (("D1", "d1"), ("D2", "d2"), ("D3", "d3")):
        if steps[f"{run}_torch"].walls:
            reported(name, "shardkit / torch in the job", steps[run].median()
                     / steps[f"{run}_torch"].median())
            reported(name, "shardkit / torch with start-up", steps[run].median()
                     / steps[f"{run}_torch_wall"].median())
    for name, (ok, why) in sorted(outputs.items()):
        check(checks, name[:2].upper(), ok, f"{name}: output equals the checkpoint", why)
    return all(checks)


def result_json(args, warm, steps, outputs, passed):
    floor = steps["floor"].median()

    def run(name):
        if not steps[name].walls:
            return None
        wall = steps[name].median()
        more = {}
        if name + "_wall" in steps:
            more["wall_with_startup_s"] = steps[name + "_wall"].median()
        return {"wall_s": wall, "over_floor": wall / floor, "peak_rss_mib": steps[name].peaks(),
                "equal": outputs.get(name, (None,))[0], **more}

    d1_torch = run("d1_torch")
    if d1_torch:
        d1_torch["to_torch_save_s"] = steps["d1_torch_to_pt"].median()
    return {"mode": "dcp", "nproc": args.nproc, "reshard_nproc": RESHARD_NPROC,
            "ck_mib": args.ck_mib, "tensors": args.ck_mib // 64, "memory_mib": args.memory_mib,
            "repeats": args.repeats, "warm_read_s": warm, "floor_s": floor,
            "d1": run("d1"), "d1_torch": d1_torch, "d2": run("d2"), "d2_torch": run("d2_torch"),
            "d3": run("d3"), "d3_torch": run("d3_torch"),
            "d3_over_d2": steps["d3"].median() / steps["d2"].median(),
            "outputs_ok": all(ok for ok, _ in outputs.values()), "pass": passed}
