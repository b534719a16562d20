"""The checkpoint mode of compare_torch.py: `shardkit shard`/`gather`/`reshard` beside PyTorch 1.13
and the durable-copy floor, in one run (PyTorch's side in checkpoint_torch.py, the checkpoint and
the output comparisons in checkpoint_files.py).

Checkpoint mode (issue 14): one run, side by side, on a checkpoint of ck_mib/64 tensors "w000"...
of [4096, 4096] F32 (64 MiB each) written in WORKDIR, chunked on dim 0 over every rank:

  integration/bench/compare_torch.py --checkpoint-mode --shardkit bazel-bin/integration/shardkit \
      --ck-mib 2048 --nproc 4 [--repeats 1] [--workdir DIR]

- floor: `cp CK COPY && sync` (the durable-copy floor), after the page cache holds CK;
- torch: rank 0 maps CK (mmap + torch.frombuffer per tensor), the others give each parameter a meta
  tensor of its shape, `shard_parameter` per tensor over gloo, `torch.save` of each rank's local
  shards to WORKDIR/torch-out/rank-R.pt (no fsync); time inside the job (barrier to barrier, rank 0)
  and wall time with start-up; peak RSS = VmHWM of each rank's whole process;
- `shardkit shard` (scatter from rank 0) with the default --memory-mib and with --memory-mib 32
  (output compared byte for byte), and `shardkit shard --strategy direct` (default --memory-mib:
  every rank reads its own shards from CK; its rank files compared byte for byte with the default
  scatter run's; index.json is not compared: it records the strategy); per-rank peak RSS from the
  summary table `shard` prints on stderr;
- `shardkit gather` of the default scatter output (peak RSS from wait4's ru_maxrss; every tensor
  compared with CK's);
- `shardkit gather --max-shard-size 500MB` of the same output into WORKDIR/gathered-hf/ (issue 17:
  Hugging Face files, 5 of them for 2 GiB; every tensor compared with CK's in the file the index
  names, total_size checked);
- R1 (issue 17), to 3 ranks with a plan chunking every tensor on dim 1 (WORKDIR/plan-dim1.json):
  `shardkit shard --strategy direct --nproc 3` of CK, and `shardkit reshard --nproc 3` of the
  default scatter output (chunk dim 0 over --nproc ranks: 4 by default, as the issue asks; with
  another --nproc it reshards from those ranks and says so), both with the default --memory-mib;
  reshard's rank files compared byte for byte with the direct run's (index.json records the
  strategy and is not compared); per-rank peak RSS and the "planned in" seconds from reshard's
  summary.
Each timed step starts after a `sync`, so none pays for an earlier step's dirty pages; with
--repeats R every step runs R times, each figure is the median wall time and the highest peak RSS.
Targets (M = 512, the default --memory-mib), each with pass/fail:
- C1: shard wall <= 1.6x floor, every rank's peak RSS <= M + 160 MiB (shard / torch reported);
- C2: shard --strategy direct wall <= 1.3x floor (direct / torch reported; the issue expects about
  0.22x torch's time in the job), every rank's peak RSS <= M + 160 MiB, rank files identical;
- C3: shard --memory-mib 32: every rank's peak RSS <= 200 MiB, output identical;
- C4: gather wall <= 2x floor, peak RSS <= M + 160 MiB, gathered tensors equal CK's;
- R1: reshard wall <= 1.5x shard --strategy direct's to 3 ranks in the same run, every rank's peak
  RSS <= M + 160 MiB, rank files identical (planning seconds reported);
- R2: gather --max-shard-size 500MB wall <= 1.2x the single-file gather's in the same run, peak
  RSS <= M + 160 MiB, its tensors equal CK's.
Prints a table, the targets and one JSON line last; exits 1 only if an output is wrong (a missed
target is reported, not an error). Without torch the torch step is skipped (and said so). WORKDIR
defaults to a fresh temporary directory, removed afterwards; a given --workdir keeps what the run
wrote (plan.json, plan-dim1.json, out-default/, out-m32/, out-direct/, gathered.safetensors,
gathered-hf/, out-direct3/, out-reshard/ and each step's .log).
"""
import json
import os
import shutil
import sys
import time

from bench_common import (Step, check, reported, run_checked, step_line, target, time_floor,
                          time_shard, work_directory)
from checkpoint_files import (CK_COLS, CK_ROWS, read_through, same_hf_tensors, same_output,
                              same_tensors, write_checkpoint)
from checkpoint_torch import time_torch
from torch_fix import TORCH_PYTHON, torch_importable

CK_PLAN = {"rules": [{"match": "*", "spec": {"type": "chunk", "dim": 0,
                                              "placements": {"ranks": "all"}}}]}
RESHARD_PLAN = {"rules": [{"match": "*", "spec": {"type": "chunk", "dim": 1,      # R1's new plan
                                                   "placements": {"ranks": "all"}}}]}
BUDGET_MIB = 512                              # shardkit's default --memory-mib
RSS_SLACK_MIB = 160
SMALL_BUDGET_MIB = 32
SMALL_RSS_LIMIT_MIB = 200
# The timed `shardkit shard` runs: step name -> (output directory in WORKDIR, extra flags).
SHARD_STEPS = {"shard": ("out-default", []),
               "shard_m32": ("out-m32", ["--memory-mib", str(SMALL_BUDGET_MIB)]),
               "direct": ("out-direct", ["--strategy", "direct"])}   # default --memory-mib
HF_SHARD_SIZE = "500MB"                       # R2: gather --max-shard-size
# The timed `shardkit gather` runs of the default shard output: step -> (output in WORKDIR, flags).
GATHER_STEPS = {"gather": ("gathered.safetensors", []),
                "gather_hf": ("gathered-hf", ["--max-shard-size", HF_SHARD_SIZE])}
RESHARD_NPROC = 3                             # R1: the new world size
RESHARD_FROM_NPROC = 4                        # R1: the issue's old world size
RESHARD_TARGET = 1.5                          # R1: reshard wall / direct to 3 ranks
# R1's timed runs to RESHARD_NPROC ranks with RESHARD_PLAN: step -> output directory in WORKDIR.
RESHARD_STEPS = {"direct3": "out-direct3", "reshard": "out-reshard"}


def checkpoint_mode(args):
    if args.ck_mib < 64 or args.ck_mib % 64:
        sys.exit("compare_torch: --ck-mib must be a positive multiple of 64")
    have_torch = torch_importable()
    if not have_torch:
        print(f"compare_torch: torch skipped: `{TORCH_PYTHON} -c 'import torch'` fails "
              "(apt-get install python3-torch)", file=sys.stderr)
    with work_directory(args.workdir, "compare_torch-") as work:
        return checkpoint_bench(args, work, have_torch)


def checkpoint_bench(args, work, have_torch):
    ck, plans, warm = prepare(args, work)
    steps, torch_rows = time_steps(args, work, ck, plans, have_torch)
    outputs = check_outputs(work, ck)
    print_table(args, steps)
    passed = print_targets(args, steps, outputs)
    print(json.dumps(result_json(args, warm, steps, torch_rows, outputs, passed)))
    ok = (outputs["identical"] and outputs["direct_identical"] and outputs["gather"][0]
          and outputs["gather_hf"][0] and outputs["reshard_identical"])
    return 0 if ok else 1    # a missed target alone is not an error


def prepare(args, work):
    """Writes the plans and the checkpoint, then warms the page cache: (checkpoint, (plan, R1's
    dim-1 plan), seconds the warm read took)."""
    count = args.ck_mib // 64
    ck = os.path.join(work, "checkpoint.safetensors")
    plans = (os.path.join(work, "plan.json"), os.path.join(work, "plan-dim1.json"))
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


def time_steps(args, work, ck, plans, have_torch):
    """Every timed step, args.repeats times: ({step name: Step}, torch's rows per rank)."""
    names = ["floor", "torch", "torch_wall", *SHARD_STEPS, *GATHER_STEPS, *RESHARD_STEPS]
    steps, torch_rows = {name: Step() for name in names}, {}
    shard_cmd = [args.shardkit, "shard", "--nproc", str(args.nproc), "--plan", plans[0],
                 "--checkpoint", ck]
    to_three = ["--nproc", str(RESHARD_NPROC), "--plan", plans[1]]
    reshard_cmds = {"direct3": [args.shardkit, "shard", "--strategy", "direct", *to_three,
                                "--checkpoint", ck],
                    "reshard": [args.shardkit, "reshard", *to_three,
                                "--in", shard_out(work, "shard")]}
    if args.nproc != RESHARD_FROM_NPROC:
        print(f"R1: reshard from the default shard output's {args.nproc} ranks (--nproc "
              f"{args.nproc}), not the issue's {RESHARD_FROM_NPROC}", flush=True)
    for attempt in range(args.repeats):
        steps["floor"].add(time_floor(ck, work))
        print(f"[{attempt}] floor (cp + sync): {steps['floor'].walls[-1]:.3f} s", flush=True)
        if have_torch:
            time_torch(args, ck, work, attempt, steps, torch_rows)
        for name, (out, extra) in SHARD_STEPS.items():
            steps[name].add(*time_shard(shard_cmd + extra, os.path.join(work, out), args.nproc))
            print(f"[{attempt}] shard {' '.join(extra) or '(default --memory-mib)'}: "
                  f"{steps[name].walls[-1]:.3f} s", flush=True)
        for name, (out, extra) in GATHER_STEPS.items():
            steps[name].add(*time_gather(args, os.path.join(work, out), extra))
            print(f"[{attempt}] {' '.join(['gather', *extra])}: {steps[name].walls[-1]:.3f} s",
                  flush=True)
        for name, out in RESHARD_STEPS.items():
            steps[name].add(*time_shard(reshard_cmds[name], os.path.join(work, out),
                                        RESHARD_NPROC))
            print(f"[{attempt}] {reshard_label(args, name)}: {steps[name].walls[-1]:.3f} s, "
                  f"planned in {steps[name].planned[-1]:.3f} s", flush=True)
    return steps, torch_rows


def reshard_label(args, name):
    """R1's runs as the table and the log name them."""
    if name == "direct3":
        return f"direct to {RESHARD_NPROC} ranks, dim 1"
    return f"reshard {args.nproc} -> {RESHARD_NPROC} ranks, dim 0->1"


def time_gather(args, gathered, extra):
    """`shardkit gather` of the default run's output into gathered (a file, or a directory with
    --max-shard-size), after a sync: (wall seconds, {0: its ru_maxrss in MiB})."""
    if os.path.isdir(gathered):
        shutil.rmtree(gathered)
    elif os.path.exists(gathered):
        os.remove(gathered)
    work = os.path.dirname(gathered)
    wall, maxrss = run_checked([args.shardkit, "gather", "--in", shard_out(work, "shard"),
                                "--out", gathered, *extra], gathered + ".log")
    return wall, {0: maxrss}


def shard_out(work, name):
    return os.path.join(work, SHARD_STEPS[name][0])


def reshard_out(work, name):
    return os.path.join(work, RESHARD_STEPS[name])


def check_outputs(work, ck):
    """identical: the --memory-mib 32 output's rank files and index.json are the default run's;
    direct_identical: so are the direct output's rank files (index.json, which records the
    strategy, is not compared);
    gather: (the gathered tensors are CK's, why not); gather_hf: (the same for the Hugging Face
    output's files, why not, how many files);
    reshard_identical: reshard's rank files are those of the direct run to 3 ranks (index.json
    records the strategy and is not compared)."""
    default = shard_out(work, "shard")
    return {"identical": same_output(default, shard_out(work, "shard_m32"),
                                     lambda n: n.endswith(".safetensors") or n == "index.json"),
            "direct_identical": same_output(default, shard_out(work, "direct"),
                                            lambda n: n.endswith(".safetensors")),
            "gather": same_tensors(os.path.join(work, "gathered.safetensors"), ck),
            "gather_hf": same_hf_tensors(os.path.join(work, "gathered-hf"), ck),
            "reshard_identical": same_output(reshard_out(work, "direct3"),
                                             reshard_out(work, "reshard"),
                                             lambda n: n.endswith(".safetensors"))}


def print_table(args, steps):
    floor = steps["floor"].median()
    print()
    print(f"{args.nproc} ranks, {args.ck_mib // 64} x [{CK_ROWS}, {CK_COLS}] F32 ({args.ck_mib} "
          f"MiB), chunk dim 0 over all ranks; {args.repeats} repeat(s), medians")
    print(f"{'run':<30} {'wall_s':>8} {'x floor':>8} {'peak RSS MiB per rank':<32}")

    def line(name, step, note=""):
        step_line(name, step, floor, note)

    line("floor: cp + sync", steps["floor"])
    if steps["torch"].walls:
        line("torch 1.13 in the job", steps["torch"], "  (no fsync)")
        line("torch 1.13 with start-up", steps["torch_wall"])
    else:
        print(f"{'torch 1.13':<30} skipped: `{TORCH_PYTHON} -c 'import torch'` fails")
    line(f"shard (default M={BUDGET_MIB})", steps["shard"])
    line(f"shard --memory-mib {SMALL_BUDGET_MIB}", steps["shard_m32"])
    line("shard --strategy direct", steps["direct"])
    line("gather", steps["gather"])
    line(f"gather --max-shard-size {HF_SHARD_SIZE}", steps["gather_hf"])
    line(reshard_label(args, "direct3"), steps["direct3"])
    line(reshard_label(args, "reshard"), steps["reshard"],
         f"  planned in {steps['reshard'].median_planned():.3f} s")


def print_targets(args, steps, outputs):
    """Prints the targets C1-C4, R1 and R2 with pass/fail (the ratios to torch only reported):
    whether every one passed."""
    floor, s1, direct, g = (steps[n].median() for n in ("floor", "shard", "direct", "gather"))
    rss_limit, checks = BUDGET_MIB + RSS_SLACK_MIB, []
    print()
    target(checks, "C1", s1 / floor, 1.6, "shard wall / floor")
    versus_torch(steps, "C1", "shard", 0.27)
    target(checks, "C1", max(steps["shard"].peaks()), rss_limit,
           "shard: max rank peak RSS MiB (M + 160)")
    target(checks, "C2", direct / floor, 1.3, "shard --strategy direct wall / floor")
    versus_torch(steps, "C2", "direct", 0.22)
    target(checks, "C2", max(steps["direct"].peaks()), rss_limit,
           "direct: max rank peak RSS MiB (M + 160)")
    check(checks, "C2", outputs["direct_identical"],
          "direct: rank files byte-identical to scatter's")
    target(checks, "C3", max(steps["shard_m32"].peaks()), SMALL_RSS_LIMIT_MIB,
           f"shard --memory-mib {SMALL_BUDGET_MIB}: max rank peak RSS MiB")
    check(checks, "C3", outputs["identical"], "output byte-identical to the default run")
    target(checks, "C4", g / floor, 2.0, "gather wall / floor")
    target(checks, "C4", max(steps["gather"].peaks()), rss_limit, "gather peak RSS MiB (M + 160)")
    gather_ok, why = outputs["gather"]
    check(checks, "C4", gather_ok, "gathered tensors equal the checkpoint", why)
    reshard_targets(args, checks, steps, outputs["reshard_identical"], rss_limit)
    hf_targets(checks, steps, outputs["gather_hf"], rss_limit)
    return all(checks)


def reshard_targets(args, checks, steps, identical, rss_limit):
    """R1: reshard to 3 ranks against shard --strategy direct to 3 ranks of the same run."""
    ratio = steps["reshard"].median() / steps["direct3"].median()
    origin = "" if args.nproc == RESHARD_FROM_NPROC else f" (from {args.nproc} ranks)"
    target(checks, "R1", ratio, RESHARD_TARGET,
           f"reshard{origin} wall / direct to {RESHARD_NPROC} ranks")
    target(checks, "R1", max(steps["reshard"].peaks()), rss_limit,
           "reshard: max rank peak RSS MiB (M + 160)")
    check(checks, "R1", identical, "reshard: rank files byte-identical to direct's")
    print(f"{'R1':<4} {'reshard: planned in (s, its summary)':<52} "
          f"{steps['reshard'].median_planned():>9.3f}    (reported)")


def hf_targets(checks, steps, hf_output, rss_limit):
    """R2: gather --max-shard-size against the single-file gather of the same run."""
    ratio = steps["gather_hf"].median() / steps["gather"].median()
    target(checks, "R2", ratio, 1.2, f"gather --max-shard-size {HF_SHARD_SIZE} wall / gather")
    target(checks, "R2", max(steps["gather_hf"].peaks()), rss_limit,
           "gather --max-shard-size: peak RSS MiB (M + 160)")
    ok, why, files = hf_output
    check(checks, "R2", ok, f"its {files} file(s)' tensors equal the checkpoint", why)


def versus_torch(steps, name, run, expected):
    """Reports step run's wall time over torch's, in the job and with start-up."""
    if not steps["torch"].walls:
        print(f"{name:<4} {run} wall / torch: skipped (no torch)")
        return
    wall = steps[run].median()
    for text, base in ((f"{run} wall / torch in-job (issue: about {expected})", "torch"),
                       (f"{run} wall / torch wall with start-up", "torch_wall")):
        reported(name, text, wall / steps[base].median())


def result_json(args, warm, steps, torch_rows, outputs, passed):
    floor, tj, tw = (steps[n].median() for n in ("floor", "torch", "torch_wall"))

    def run(name, **more):
        return {"wall_s": steps[name].median(), "peak_rss_mib": steps[name].peaks(), **more}

    def over(name, base):
        return None if base is None else steps[name].median() / base

    return {
        "mode": "checkpoint", "nproc": args.nproc, "ck_mib": args.ck_mib,
        "tensors": args.ck_mib // 64, "repeats": args.repeats, "warm_read_s": warm,
        "floor_s": floor,
        "torch": None if tj is None else {
            "in_job_s": tj, "wall_s": tw, "peak_rss_mib": steps["torch"].peaks(),
            "baseline_rss_mib": [torch_rows[r]["baseline_rss_mib"] for r in sorted(torch_rows)]},
        "shard": run("shard"),
        "shard_m32": run("shard_m32", identical=outputs["identical"]),
        "direct": run("direct", identical_to_scatter=outputs["direct_identical"]),
        "gather": {"wall_s": steps["gather"].median(), "peak_rss_mib": steps["gather"].rss[0],
                   "equal": outputs["gather"][0]},
        "gather_hf": {"max_shard_size": HF_SHARD_SIZE, "wall_s": steps["gather_hf"].median(),
                      "peak_rss_mib": steps["gather_hf"].rss[0], "files": outputs["gather_hf"][2],
                      "equal": outputs["gather_hf"][0]},
        "direct3": run("direct3", nproc=RESHARD_NPROC, chunk_dim=1),
        "reshard": run("reshard", from_nproc=args.nproc, nproc=RESHARD_NPROC, chunk_dims=[0, 1],
                       planned_s=steps["reshard"].median_planned(),
                       identical_to_direct=outputs["reshard_identical"]),
        "ratios": {"shard_over_floor": over("shard", floor),
                   "gather_over_floor": over("gather", floor),
                   "gather_hf_over_gather": over("gather_hf", steps["gather"].median()),
                   "reshard_over_direct3": over("reshard", steps["direct3"].median()),
                   "shard_over_torch_in_job": over("shard", tj),
                   "shard_over_torch_wall": over("shard", tw),
                   "direct_over_floor": over("direct", floor),
                   "direct_over_torch_in_job": over("direct", tj),
                   "direct_over_torch_wall": over("direct", tw)},
        "pass": passed,
    }
