#!/usr/bin/env python3
"""Runs PyTorch 1.13's shard_parameter and `shardkit bench` with the same sizes, side by side.

Optional (issue 7): needs `/usr/bin/python3 -c "import torch"` to work (Debian: apt-get install
python3-torch); otherwise it says so and exits 0. Debian's torch 1.13 cannot import
torch.distributed._shard on Python 3.11 (a dataclass default, fixed upstream in PR #91795); the fix
is applied at import time here, the installed package is not touched.

  integration/bench/compare_torch.py --shardkit bazel-bin/integration/shardkit \\
      --nproc 4 --mib 256 --repeats 5            # P1-P4
  integration/bench/compare_torch.py ... --mib 1024 --params 200   # P5 (ShardModule vs a loop)

Each side: rank 0 holds the parameter(s) (chunked on dim 0 over every rank), shape
[mib*256/params, 4096/element size]; time from a barrier before to a barrier after; RSS from
/proc/self/status (baseline before the parameters exist, peak = VmHWM after resetting it).
PyTorch needs the full parameter on every rank: non-source ranks create and fill it (as a model's
initialisation would), after their baseline. shardkit's non-source ranks start from meta tensors.

Checkpoint mode (issue 14, `--checkpoint-mode`): see checkpoint_compare.py (its PyTorch side:
checkpoint_torch.py). DCP mode (issue 32, `--dcp-mode`, PyTorch 2.x from --python): see
dcp_compare.py (its PyTorch side: dcp_torch.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import checkpoint_compare
import checkpoint_torch
import dcp_compare
from torch_fix import TORCH_PYTHON, FixFinder, reset_peak_rss, status_mib, torch_importable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_rank(args):
    sys.meta_path.insert(0, FixFinder)
    import torch
    import torch.distributed as dist
    from torch.distributed._shard import shard_parameter
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec

    rank, world = args.torch_rank, args.nproc
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank,
                            world_size=world)
    dtype = getattr(torch, args.dtype)
    element = torch.empty(0, dtype=dtype).element_size()
    shape = ((args.mib << 20) // args.params // 4096, 4096 // element)
    reset_peak_rss()
    baseline = status_mib("VmRSS")
    tensors = [torch.ones(shape, dtype=dtype) for _ in range(args.params)]
    seconds = []
    for _ in range(args.repeats):
        module = torch.nn.Module()
        for i, t in enumerate(tensors):
            module.register_parameter(f"w{i}", torch.nn.Parameter(t, requires_grad=False))
        spec = ChunkShardingSpec(dim=0, placements=[f"rank:{r}/cpu" for r in range(world)])
        dist.barrier()
        start = time.perf_counter()
        for i in range(args.params):
            shard_parameter(module, f"w{i}", spec, src_rank=0)
        dist.barrier()
        seconds.append(time.perf_counter() - start)
        del module
    seconds.sort()
    print(json.dumps({"rank": rank, "world": world, "mib": args.mib, "strategy": "torch",
                      "median_s": seconds[len(seconds) // 2], "min_s": seconds[0],
                      "baseline_rss_mib": baseline, "peak_rss_mib": status_mib("VmHWM")}),
          flush=True)


def run_torch(args):
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen(
            [TORCH_PYTHON, os.path.abspath(__file__), "--torch-rank", str(r), "--store", store]
            + common_flags(args), stdout=subprocess.PIPE, text=True) for r in range(args.nproc)]
        lines = [p.communicate()[0] for p in procs]
        if any(p.returncode != 0 for p in procs):
            sys.exit("compare_torch: a PyTorch rank failed")
    return [json.loads(line) for text in lines for line in text.splitlines() if line.strip()]


def run_shardkit(args, strategy):
    cmd = [args.shardkit, "bench", "--nproc", str(args.nproc), "--mib", str(args.mib),
           "--repeats", str(args.repeats), "--dtype", args.dtype, "--params", str(args.params),
           "--strategy", strategy]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def common_flags(args):
    return ["--nproc", str(args.nproc), "--mib", str(args.mib), "--repeats", str(args.repeats),
            "--dtype", args.dtype, "--params", str(args.params)]


def summary(rows):
    """Median time (rank 0), worst non-source RSS growth, agreement (rank 0)."""
    by_rank = {r["rank"]: r for r in rows}
    others = [r for r in rows if r["rank"] != 0] or rows
    growth = max(r["peak_rss_mib"] - r["baseline_rss_mib"] for r in others)
    return {"median_s": by_rank[0]["median_s"], "min_s": by_rank[0]["min_s"],
            "nonsrc_rss_growth_mib": growth, "agree_median_s": by_rank[0].get("agree_median_s"),
            "bytes_received": max(r.get("bytes_received", 0) for r in others)}


# ---- checkpoint mode (issue 14) --------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shardkit", default="bazel-bin/integration/shardkit")
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, help="default 5; 1 in checkpoint mode")
    parser.add_argument("--params", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--strategies", default="scatter,raw,broadcast")
    parser.add_argument("--checkpoint-mode", action="store_true",
                        help="issue 14: shard/gather a checkpoint beside PyTorch and cp + sync")
    parser.add_argument("--dcp-mode", action="store_true",
                        help="issue 32: PyTorch DCP in and out (D1-D3) beside torch 2.x's own "
                        "way and cp + sync")
    parser.add_argument("--ck-mib", type=int, default=2048,
                        help="checkpoint and DCP modes: checkpoint size (a multiple of 64)")
    parser.add_argument("--workdir", help="checkpoint and DCP modes: where to write (kept); "
                        "default a fresh temporary directory, removed afterwards")
    parser.add_argument("--timeout", type=float, default=900,
                        help="checkpoint and DCP modes: seconds a PyTorch job may take")
    parser.add_argument("--memory-mib", type=int, default=512,
                        help="DCP mode: shardkit's --memory-mib (M of the targets)")
    parser.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                        help="DCP mode: the Python with torch 2.x and safetensors (default: the "
                        "repository's .venv, made by tools/setup --test-venv)")
    parser.add_argument("--torch-rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--torch-ck", help=argparse.SUPPRESS)
    parser.add_argument("--torch-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 1 if args.checkpoint_mode or args.dcp_mode else 5
    if args.torch_rank is not None and args.torch_ck:
        return checkpoint_torch.torch_checkpoint_rank(args)
    if args.torch_rank is not None:
        return torch_rank(args)
    if args.checkpoint_mode:
        return checkpoint_compare.checkpoint_mode(args)
    if args.dcp_mode:
        return dcp_compare.dcp_mode(args)
    if not torch_importable():
        print("compare_torch: skipped: `/usr/bin/python3 -c 'import torch'` fails "
              "(apt-get install python3-torch)", file=sys.stderr)
        return 0
    results = {"torch": summary(run_torch(args))}
    for strategy in args.strategies.split(","):
        results[strategy] = summary(run_shardkit(args, strategy))
    shard_bytes = (args.mib << 20) // args.params // 4096 * 4096 * args.params // args.nproc
    print(f"{args.nproc} ranks x {args.mib} MiB {args.dtype}, {args.params} parameter(s), "
          f"{args.repeats} repeats; non-source shard = {shard_bytes / 2**20:.1f} MiB")
    print(f"{'run':<10} {'median_s':>9} {'min_s':>8} {'x torch':>8} {'rss+ MiB':>9} "
          f"{'x shard':>8} {'agree_ms':>9}")
    base = results["torch"]["median_s"]
    for name, r in results.items():
        agree = "" if r["agree_median_s"] is None else f"{r['agree_median_s'] * 1e3:.2f}"
        print(f"{name:<10} {r['median_s']:>9.4f} {r['min_s']:>8.4f} {r['median_s'] / base:>8.3f} "
              f"{r['nonsrc_rss_growth_mib']:>9.1f} "
              f"{r['nonsrc_rss_growth_mib'] * 2**20 / shard_bytes:>8.2f} {agree:>9}")
    if "scatter" in results and "raw" in results:
        print(f"scatter / raw = {results['scatter']['median_s'] / results['raw']['median_s']:.2f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
