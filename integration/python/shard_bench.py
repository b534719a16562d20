#!/usr/bin/env python3
"""Py1: shard_parameter from Python against the C++ bench and torch's distribute_tensor, one run.

    python shard_bench.py [--nproc 4] [--mib 256] [--repeats 5] [--pairs 3] [--backend gloo]

Run it with a Python where the wheel and torch are installed (`pip install` the wheel of
./tools/wheel). Each pair runs, in alternating order, three jobs of --nproc local ranks:
  cpp     `python -m shardkit bench --nproc N --mib M --repeats K` (ShardParameter in C++);
  python  shardkit.shard_parameter from rank 0's float32 [M*256, 1024] tensor, chunked by rows
          over every rank, None on the others;
  torch   torch.distributed.tensor.distribute_tensor of the same tensor, Shard(0) on a 1-D
          mesh of every rank, over torch's gloo (src_data_rank=0: the others pass an empty tensor
          of the shape, which is torch's contract).
Each job's figure is the slowest rank's median over K timed calls after one untimed, between
barriers; peak RSS is each job's largest rank's. Prints one line per job and the ratios
python/cpp and python/torch per pair, then their medians.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def worker(args):
    import torch
    rank, world = args.rank, args.nproc
    rows = args.mib * 256
    x = torch.rand(rows, 1024) if rank == 0 or args.mode == "torch" else None
    if args.mode == "torch" and rank != 0:
        x = torch.empty(rows, 1024)
    times = []
    if args.mode == "python":
        import shardkit
        comm = shardkit.init(backend=args.backend, rank=rank, world_size=world,
                             store="file://" + args.store, timeout=120)
        spec = {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}
        for i in range(args.repeats + 1):
            comm.barrier()
            start = time.perf_counter()
            st = shardkit.shard_parameter(comm, x, spec)
            times.append(time.perf_counter() - start)
            del st
    else:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        dist.init_process_group("gloo", init_method="file://" + args.store + "-torch",
                                rank=rank, world_size=world)
        mesh = init_device_mesh("cpu", (world,))
        for i in range(args.repeats + 1):
            dist.barrier()
            start = time.perf_counter()
            dt = distribute_tensor(x, mesh, [Shard(0)], src_data_rank=0)
            times.append(time.perf_counter() - start)
            del dt
        dist.destroy_process_group()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"median_s": statistics.median(times[1:]), "peak_rss_mib": rss_mib}))


def job(args, mode):
    """The slowest rank's median and the largest peak RSS of one job of `mode`."""
    if mode == "cpp":
        out = subprocess.run([sys.executable, "-m", "shardkit", "bench", "--nproc",
                              str(args.nproc), "--mib", str(args.mib), "--repeats",
                              str(args.repeats), "--backend", args.backend],
                             capture_output=True, text=True, check=True).stdout
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    else:
        store = tempfile.mkdtemp(prefix="shard_bench-") + "/store"
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--mode", mode,
                                   "--rank", str(r), "--store", store] + common(args),
                                  stdout=subprocess.PIPE, text=True) for r in range(args.nproc)]
        lines = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return max(l["median_s"] for l in lines), max(l["peak_rss_mib"] for l in lines)


def common(args):
    return ["--nproc", str(args.nproc), "--mib", str(args.mib), "--repeats", str(args.repeats),
            "--backend", args.backend]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        return worker(args)
    ratios_cpp, ratios_torch = [], []
    for pair in range(args.pairs):
        modes = ["cpp", "python", "torch"] if pair % 2 == 0 else ["torch", "python", "cpp"]
        got = {mode: job(args, mode) for mode in modes}
        for mode in ["cpp", "python", "torch"]:
            print(f"pair {pair}: {mode:6s} {got[mode][0] * 1e3:8.1f} ms  peak RSS "
                  f"{got[mode][1]:7.1f} MiB", flush=True)
        ratios_cpp.append(got["python"][0] / got["cpp"][0])
        ratios_torch.append(got["python"][0] / got["torch"][0])
        print(f"pair {pair}: python/cpp {ratios_cpp[-1]:.3f}  python/torch "
              f"{ratios_torch[-1]:.3f}", flush=True)
    print(f"median of {args.pairs} pairs ({args.backend}, {args.nproc} ranks, {args.mib} MiB): "
          f"python/cpp {statistics.median(ratios_cpp):.3f}, python/torch "
          f"{statistics.median(ratios_torch):.3f}")


if __name__ == "__main__":
    main()
