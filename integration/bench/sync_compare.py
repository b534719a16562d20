"""Weight sync target S2 (issue: weight sync): `shardkit bench --strategy sync` on 4 ranks
(the same ranks, chunk dim 0 -> chunk dim 1, one parameter of MIB MiB) beside torch's
DTensor.redistribute(Shard(0) -> Shard(1)) over gloo on 4 torch.multiprocessing ranks with
init_device_mesh("cpu", (4,)), in one run, alternating. Time = max over ranks of the median call.

  python3 integration/bench/sync_compare.py --shardkit bazel-bin/integration/shardkit \
      [--mib 256] [--repeats 5] [--runs 3]

Prints one line per run and the ratio of the medians."""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

WORLD = 4


def torch_rank(rank, mib, repeats, port, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    cols = 1024
    rows = mib * (1 << 20) // 4 // cols
    full = torch.empty(rows, cols) if rank == 0 else torch.empty(0)
    if rank == 0:
        full.copy_(torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols))
    rows_sharded = distribute_tensor(full if rank == 0 else torch.empty(rows, cols), mesh,
                                     [Shard(0)], src_data_rank=0)
    del full
    times = []
    for _ in range(repeats + 1):
        dist.barrier()
        start = time.perf_counter()
        cols_sharded = rows_sharded.redistribute(mesh, [Shard(1)])
        dist.barrier()
        times.append(time.perf_counter() - start)
        del cols_sharded
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"rank": rank, "median_s": statistics.median(times[1:]), "peak_rss_mib": peak})
    dist.destroy_process_group()


def run_torch(mib, repeats, port, target=torch_rank):
    """`target(rank, mib, repeats, port, out)` on WORLD spawned ranks; each puts a dict with
    median_s and peak_rss_mib on `out`. The max over ranks of each."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, mib, repeats, port, out))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    rows = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return max(r["median_s"] for r in rows), max(r["peak_rss_mib"] for r in rows)


def run_bench(binary, mib, repeats, *flags):
    """`shardkit bench` on WORLD ranks: the max over ranks of median_s and of peak_rss_mib."""
    cmd = [binary, "bench", "--nproc", str(WORLD), "--mib", str(mib), "--repeats", str(repeats),
           *flags]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return max(r["median_s"] for r in rows), max(r["peak_rss_mib"] for r in rows)


def run_shardkit(binary, mib, repeats):
    return run_bench(binary, mib, repeats, "--strategy", "sync", "--sources", str(WORLD),
                     "--same-ranks")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shardkit", required=True)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ours, theirs = [], []
    for run in range(args.runs):
        s, s_rss = run_shardkit(args.shardkit, args.mib, args.repeats)
        t, t_rss = run_torch(args.mib, args.repeats, 29500 + run)
        ours.append(s)
        theirs.append(t)
        print(f"run {run}: shardkit sync {s:.4f} s (peak {s_rss:.0f} MiB/rank), torch "
              f"redistribute {t:.4f} s (peak {t_rss:.0f} MiB/rank), ratio {s / t:.3f}")
    print(f"median: shardkit {statistics.median(ours):.4f} s, torch "
          f"{statistics.median(theirs):.4f} s, ratio "
          f"{statistics.median(ours) / statistics.median(theirs):.3f}")


if __name__ == "__main__":
    sys.exit(main())
