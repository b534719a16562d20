"""UCX target U1 (issue: UCX backend): `shardkit bench --nproc 4 --mib MIB` (ShardParameter of one
parameter chunked on dim 0, scattered from rank 0) over UCX and over Gloo, beside torch's
distribute_tensor(Shard(0), src_data_rank=0) over gloo on 4 torch.multiprocessing ranks, and one
memcpy of the bytes that change hands (3/4 of MIB, numpy, buffers touched first), in one run,
alternating. Time = max over ranks of the median call.

  .venv/bin/python integration/bench/ucx_compare.py --shardkit bazel-bin/integration/shardkit \\
      [--mib 256] [--repeats 5] [--runs 3]

SHARDKIT_PLUGIN_PATH must name the folder of libshardkit_backend_ucx.so (tools/shardkit sets it).
Prints one line per run and the medians' ratios."""
import argparse
import os
import resource
import statistics
import sys
import time

from sync_compare import WORLD, run_bench, run_torch


def distribute_rank(rank, mib, repeats, port, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    rows, cols = mib * (1 << 20) // 4 // 1024, 1024
    # Every rank passes a tensor of the full shape; only rank 0's bytes are sent.
    full = torch.ones(rows, cols)
    times = []
    for _ in range(repeats + 1):
        dist.barrier()
        start = time.perf_counter()
        sharded = distribute_tensor(full, mesh, [Shard(0)], src_data_rank=0)
        dist.barrier()
        times.append(time.perf_counter() - start)
        del sharded
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"rank": rank, "median_s": statistics.median(times[1:]), "peak_rss_mib": peak})
    dist.destroy_process_group()


def memcpy_seconds(mib, repeats):
    """One memcpy of the bytes that change hands: (WORLD-1)/WORLD of MIB."""
    import numpy as np
    n = (mib << 20) * (WORLD - 1) // WORLD
    src, dst = np.ones(n, dtype=np.uint8), np.zeros(n, dtype=np.uint8)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shardkit", required=True)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = {"ucx": [], "gloo": [], "torch": [], "memcpy": []}
    for run in range(args.runs):
        u, u_rss = run_bench(args.shardkit, args.mib, args.repeats, "--backend", "ucx")
        g, g_rss = run_bench(args.shardkit, args.mib, args.repeats, "--backend", "gloo")
        t, t_rss = run_torch(args.mib, args.repeats, 29600 + run, target=distribute_rank)
        m = memcpy_seconds(args.mib, args.repeats)
        for key, value in (("ucx", u), ("gloo", g), ("torch", t), ("memcpy", m)):
            results[key].append(value)
        print(f"run {run}: ucx {u:.4f} s (peak {u_rss:.0f} MiB/rank), gloo {g:.4f} s (peak "
              f"{g_rss:.0f}), torch distribute_tensor {t:.4f} s (peak {t_rss:.0f}), memcpy "
              f"{m:.4f} s; ucx/torch {u / t:.3f}, ucx/gloo {u / g:.3f}, ucx/memcpy {u / m:.2f}",
              flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"median: ucx {med['ucx']:.4f} s, gloo {med['gloo']:.4f} s, torch {med['torch']:.4f} s, "
          f"memcpy {med['memcpy']:.4f} s; ucx/torch {med['ucx'] / med['torch']:.3f}, ucx/gloo "
          f"{med['ucx'] / med['gloo']:.3f}, ucx/memcpy {med['ucx'] / med['memcpy']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
