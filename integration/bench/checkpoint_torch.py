"""The PyTorch side of compare_torch.py's checkpoint mode (checkpoint_compare.py): one rank of
PyTorch 1.13's script (rank 0 maps the checkpoint, shard_parameter per tensor over gloo, torch.save
of each rank's local shards) and the job that runs it, timed."""
import json
import mmap
import os
import shutil
import sys
import time

from bench_common import run_ranks
from checkpoint_files import read_header
from torch_fix import TORCH_PYTHON, FixFinder, status_mib

# The torch ranks run the entry script (compare_torch.py --torch-rank R --torch-ck ...).
COMPARE_TORCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_torch.py")

TORCH_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                "BOOL": "bool"}


def torch_checkpoint_rank(args):
    """One rank of the PyTorch 1.13 script: rank 0 maps the checkpoint, the others give every
    parameter a meta tensor of its shape; shard_parameter per tensor; torch.save of the local
    shards."""
    sys.meta_path.insert(0, FixFinder)
    import torch
    import torch.distributed as dist
    from torch.distributed._shard import shard_parameter
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec

    rank, world = args.torch_rank, args.nproc
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank,
                            world_size=world)
    baseline = status_mib("VmRSS")
    dist.barrier()
    start = time.perf_counter()
    base, header = read_header(args.torch_ck)   # every rank knows the shapes (the model's)
    module = torch.nn.Module()
    if rank == 0:
        with open(args.torch_ck, "rb") as f:   # the mapping outlives the file object
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    for name in sorted(header):
        entry = header[name]
        dtype = getattr(torch, TORCH_DTYPES[entry["dtype"]])
        if rank == 0:
            begin, end = entry["data_offsets"]
            count = (end - begin) // torch.empty(0, dtype=dtype).element_size()
            tensor = torch.frombuffer(mapped, dtype=dtype, count=count,
                                      offset=base + begin).view(entry["shape"])
        else:
            tensor = torch.empty(entry["shape"], dtype=dtype, device="meta")
        module.register_parameter(name, torch.nn.Parameter(tensor, requires_grad=False))
    spec = ChunkShardingSpec(dim=0, placements=[f"rank:{r}/cpu" for r in range(world)])
    for name in sorted(header):
        shard_parameter(module, name, spec, src_rank=0)
    local = {name: getattr(module, name).local_shards()[0].tensor.detach()
             for name in sorted(header)}
    torch.save(local, os.path.join(args.torch_out, f"rank-{rank}.pt"))
    dist.barrier()
    seconds = time.perf_counter() - start
    print(json.dumps({"rank": rank, "in_job_s": seconds, "baseline_rss_mib": baseline,
                      "peak_rss_mib": status_mib("VmHWM"),
                      "local_bytes": sum(t.numel() * t.element_size() for t in local.values())}),
          flush=True)


def run_torch_checkpoint(args, ck, work, attempt):
    """One PyTorch job: (wall seconds with start-up, the ranks' JSON rows)."""
    out = os.path.join(work, "torch-out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    store = os.path.join(work, f"torch-store-{attempt}")
    flags = ["--nproc", str(args.nproc), "--store", store, "--torch-ck", ck, "--torch-out", out]
    wall, rows = run_ranks([[TORCH_PYTHON, COMPARE_TORCH, "--torch-rank", str(r)] + flags
                            for r in range(args.nproc)], args.timeout, "the PyTorch job")
    if os.path.exists(store):
        os.remove(store)
    return wall, rows


def time_torch(args, ck, work, attempt, steps, torch_rows):
    """One PyTorch job into steps["torch"] (in the job) and steps["torch_wall"]; torch_rows keeps
    each rank's row of highest peak RSS."""
    wall, rows = run_torch_checkpoint(args, ck, work, attempt)
    steps["torch"].add(rows[0]["in_job_s"], {row["rank"]: row["peak_rss_mib"] for row in rows})
    steps["torch_wall"].add(wall)
    for row in rows:
        old = torch_rows.get(row["rank"])
        if old is None or row["peak_rss_mib"] > old["peak_rss_mib"]:
            torch_rows[row["rank"]] = row
    shutil.rmtree(os.path.join(work, "torch-out"), ignore_errors=True)
    print(f"[{attempt}] torch: {rows[0]['in_job_s']:.3f} s in the job, {wall:.3f} s wall",
          flush=True)
