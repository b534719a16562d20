#!/usr/bin/env python3
"""Py1: shard_parameter from Python against the C++ bench and torch's distribute_tensor, one run.

    python shard_bench.py [--nproc 4] [--mib 256] [--repeats 5] [--pairs 3] [--backend gloo]
    python shard_bench.py --sync --mib 1024 --params 200     # Py2: plan.sync vs the C++ sync bench

Run it with a Python where the wheel and torch are installed (`pip install` the wheel of
./tools/wheel). Each pair runs, in alternating order, three jobs of --nproc local ranks:
  cpp     `python -m shardkit bench --nproc N --mib M --repeats K` (ShardParameter in C++);
  python  shardkit.shard_parameter from rank 0's float32 [M*256, 1024] tensor, chunked by rows
          over every rank, None on the others;
  torch   torch.distributed.tensor.distribute_tensor of the same tensor, Shard(0) on a 1-D
          mesh of every rank, over torch's gloo (src_data_rank=0: the others pass an empty tensor
          of the shape, which is torch's contract).
Each job's figure is the slowest rank's median over K timed calls after one untimed, each from a
barrier before to a barrier after; peak RSS is the largest rank's peak above its baseline (the
interpreter, torch and the connection: VmHWM after resetting it, as the C++ bench does). Prints one line per job and the ratios
python/cpp and python/torch per pair, then their medians.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from torch_fix import reset_peak_rss, status_mib  # noqa: E402 (/proc/self/status figures)


def source(args, rank):
    """Rank 0's parameter; torch's other ranks need an (unfilled) tensor of the shape too."""
    import torch
    if rank == 0:
        return torch.rand(args.mib * 256, 1024)
    return torch.empty(args.mib * 256, 1024) if args.mode == "torch" else None


def sync_worker(args):
    """Py2, one rank: S1's shape (--params parameters of 4096-byte rows, --mib in all) in rows on
    ranks 0-1, columns on ranks 2-3; planned once, one untimed sync, K timed between barriers.
    Peak RSS above the baseline before the tensors exist, as the C++ sync bench measures it."""
    import torch  # noqa: F401
    import shardkit
    rank = args.rank
    comm = shardkit.init(backend=args.backend, rank=rank, world_size=args.nproc,
                         store="file://" + args.store, timeout=300)
    reset_peak_rss()
    baseline = status_mib("VmRSS")
    rows = max(1, (args.mib << 20) // 4096 // args.params)
    half = args.nproc // 2
    dim, group_rank = (0, rank) if rank < half else (1, rank - half)
    spec = {"type": "chunk", "dim": dim, "placements": {"ranks": "all"}}
    side = {f"layers.{i}.weight": shardkit.zeros((rows, 1024), "float32", spec, rank=group_rank,
                                                 world_size=half) for i in range(args.params)}
    src, dst = (side, None) if rank < half else (None, side)
    plan = shardkit.plan_sync(comm, src, dst, source_ranks=list(range(half)),
                              destination_ranks=list(range(half, args.nproc)))
    times = []
    for _ in range(args.repeats + 1):
        comm.barrier()
        start = time.perf_counter()
        plan.sync(src, dst)
        comm.barrier()
        times.append(time.perf_counter() - start)
    print(json.dumps({"median_s": statistics.median(times[1:]),
                      "peak_rss_mib": status_mib("VmHWM") - baseline}))


def worker(args):
    """One rank: connects, resets its peak RSS (baseline: the interpreter, torch and the
    connection), then times K+1 calls from a barrier before to a barrier after (the first
    untimed)."""
    import torch  # noqa: F401 (before the baseline: its libraries are not the call's memory)
    rank, world = args.rank, args.nproc
    if args.mode == "python":
        import shardkit
        comm = shardkit.init(backend=args.backend, rank=rank, world_size=world,
                             store="file://" + args.store, timeout=120)
        spec = {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}
        barrier = comm.barrier
        call = lambda x: shardkit.shard_parameter(comm, x, spec)  # noqa: E731
    else:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        dist.init_process_group("gloo", init_method="file://" + args.store + "-torch",
                                rank=rank, world_size=world)
        mesh = init_device_mesh("cpu", (world,))
        barrier = dist.barrier
        call = lambda x: distribute_tensor(x, mesh, [Shard(0)], src_data_rank=0)  # noqa: E731
    reset_peak_rss()
    baseline = status_mib("VmRSS")
    x = source(args, rank)
    times = []
    for _ in range(args.repeats + 1):
        barrier()
        start = time.perf_counter()
        result = call(x)
        barrier()
        times.append(time.perf_counter() - start)
        del result
    print(json.dumps({"median_s": statistics.median(times[1:]),
                      "peak_rss_mib": status_mib("VmHWM") - baseline}))


def job(args, mode):
    """The slowest rank's median and the largest peak RSS of one job of `mode`."""
    if mode == "cpp":
        extra = ["--strategy", "sync", "--params", str(args.params)] if args.sync else []
        out = subprocess.run([sys.executable, "-m", "shardkit", "bench", "--nproc",
                              str(args.nproc), "--mib", str(args.mib), "--repeats",
                              str(args.repeats), "--backend", args.backend] + extra,
                             capture_output=True, text=True, check=True).stdout
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    else:
        store = tempfile.mkdtemp(prefix="shard_bench-") + "/store"
        procs = [subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__), "--mode", mode,
                                   "--rank", str(r), "--store", store] + common(args),
                                  stdout=subprocess.PIPE, text=True) for r in range(args.nproc)]
        lines = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    peak = max(l["peak_rss_mib"] - l.get("baseline_rss_mib", 0) for l in lines)
    return max(l["median_s"] for l in lines), peak


def common(args):
    return ["--nproc", str(args.nproc), "--mib", str(args.mib), "--repeats", str(args.repeats),
            "--backend", args.backend, "--params", str(args.params)] + (
                ["--sync"] if args.sync else [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--sync", action="store_true",
                        help="Py2: plan.sync against `shardkit bench --strategy sync`")
    parser.add_argument("--params", type=int, default=200, help="--sync: parameters")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        return sync_worker(args) if args.sync else worker(args)
    names = ["cpp", "python"] + ([] if args.sync else ["torch"])
    ratios = {"cpp": [], "torch": []}
    for pair in range(args.pairs):
        got = {mode: job(args, mode) for mode in (names if pair % 2 == 0 else names[::-1])}
        for mode in names:
            print(f"pair {pair}: {mode:6s} {got[mode][0] * 1e3:8.1f} ms  peak RSS "
                  f"{got[mode][1]:7.1f} MiB", flush=True)
        for other in names[0::2]:
            ratios[other].append(got["python"][0] / got[other][0])
        print(f"pair {pair}: " + "  ".join(f"python/{o} {ratios[o][-1]:.3f}"
                                          for o in names[0::2]), flush=True)
    print(f"median of {args.pairs} pairs ({args.backend}, {args.nproc} ranks, {args.mib} MiB"
          f"{', sync' if args.sync else ''}): " +
          ", ".join(f"python/{o} {statistics.median(ratios[o]):.3f}" for o in names[0::2]))


if __name__ == "__main__":
    main()
