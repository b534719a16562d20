#!/usr/bin/env python3
"""Writes the small DCP checkpoints that integration/formats/dcp's tests read, with torch itself.

  make_fixtures.py OUT_DIR      # run with the Python that has torch 2.15 (PyPI)
  make_fixtures.py OUT_DIR hf_sharded   # only that case (the others keep their bytes)

OUT_DIR/<case>/ is a checkpoint directory as `torch.distributed.checkpoint.save` writes it, and
OUT_DIR/<case>.expected/<fqn>.bin holds each tensor's values, row-major, little-endian, whole (the
tests compare the bytes the readers locate against them). Cases:

  basic      world 1: F32 [2, 3], BF16 [4], I64 [3, 2], FP8 (e4m3fn) [5] and U16 [3] (pickled with
             _rebuild_tensor_v3), a zero-size F32 [0, 3], a clone() of a transposed F32 tensor
             (strides (1, 3), not row-major), two non-tensor items (an int `step`, a bytes object
             `blob`) and a nested optimizer-like dict (flattened: `opt.state.w.exp_avg`, a tensor,
             and `opt.param_groups.0.lr`, a float), so that planner_data holds paths with ints.
  sharded    world 4 (gloo, one process per rank): DTensors on a 1-D mesh `rows` F32 [5, 4]
             Shard(0) (2, 2, 1, 0 rows), `cols` BF16 [3, 5] Shard(1) (2, 2, 1, 0 columns), `bias` I64
             [4] Replicate(), and on a 2 x 2 mesh `grid` I64 [5, 7] (Shard(0), Shard(1)): 3 + 2 rows
             by 4 + 3 columns.
  local      `sharded`'s state dict saved with use_collectives=False: __0.metadata ... __3.metadata.
  safetensors  world 1, FileSystemWriter(serialization_format=SAFETENSORS): every tensor item has
             the same offset (the readers reject it).
  hf_sharded world 2, HuggingFaceStorageWriter(save_distributed=True): `rows` F32 [5, 4] Shard(0)
             (3 + 2 rows), `cols` BF16 [3, 5] Shard(1) (3 + 2 columns), `bias` I64 [4]
             Replicate(): one shard-*.safetensors file per rank, DCP_SHARDING_INFO in each.

Checkpoint ids are relative paths (the script works inside OUT_DIR), so no machine path ends up
in the pickled StorageMeta.
"""

import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.filesystem import FileSystemWriter, SerializationFormat
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.device_mesh import init_device_mesh


def write_expected(case, tensors):
    folder = f"{case}.expected"
    os.makedirs(folder, exist_ok=True)
    for fqn, tensor in tensors.items():
        data = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        with open(os.path.join(folder, f"{fqn}.bin"), "wb") as f:
            f.write(data)


def basic_tensors():
    return {
        "w": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
        "b": (torch.arange(4, dtype=torch.float32) - 1.5).to(torch.bfloat16),
        "i": torch.arange(6, dtype=torch.int64).reshape(3, 2) * 1000003 - 7,
        "e4m3": (torch.arange(5, dtype=torch.float32) / 2).to(torch.float8_e4m3fn),
        "u16": torch.tensor([1, 300, 65535], dtype=torch.uint16),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
        # A clone keeps the transposed strides: (1, 3) for shape (3, 2).
        "t": (torch.arange(6, dtype=torch.float32).reshape(2, 3) + 10).t().clone(),
    }


def init_world(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def save_basic(port):
    init_world(0, 1, port)
    tensors = basic_tensors()
    assert tensors["t"].stride() == (1, 3), tensors["t"].stride()
    state = dict(tensors)
    state["step"] = 7
    state["blob"] = b"\x00shardkit\xff"
    exp_avg = torch.arange(6, dtype=torch.float32).reshape(2, 3) * -1
    state["opt"] = {"state": {"w": {"exp_avg": exp_avg}}, "param_groups": [{"lr": 0.5}]}
    tensors["opt.state.w.exp_avg"] = exp_avg
    dcp.save(state, checkpoint_id="basic")
    write_expected("basic", tensors)
    writer = FileSystemWriter("safetensors", serialization_format=SerializationFormat.SAFETENSORS)
    dcp.save({k: tensors[k] for k in ("w", "b", "i")}, storage_writer=writer)
    dist.destroy_process_group()


def sharded_tensors():
    return {
        "rows": torch.arange(20, dtype=torch.float32).reshape(5, 4) + 0.5,
        "cols": (torch.arange(15, dtype=torch.float32).reshape(3, 5) - 7).to(torch.bfloat16),
        "bias": torch.arange(4, dtype=torch.int64) * -3,
        "grid": torch.arange(35, dtype=torch.int64).reshape(5, 7) + 100,
    }


def save_sharded_rank(rank, world, port):
    init_world(rank, world, port)
    mesh = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, world // 2))
    full = sharded_tensors()
    state = {
        "rows": distribute_tensor(full["rows"], mesh, [Shard(0)]),
        "cols": distribute_tensor(full["cols"], mesh, [Shard(1)]),
        "bias": distribute_tensor(full["bias"], mesh, [Replicate()]),
        "grid": distribute_tensor(full["grid"], mesh2, [Shard(0), Shard(1)]),
    }
    dcp.save(state, checkpoint_id="sharded")
    dcp.save(state, checkpoint_id="local", use_collectives=False)
    dist.barrier()
    dist.destroy_process_group()


def save_hf_sharded_rank(rank, world, port):
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    init_world(rank, world, port)
    mesh = init_device_mesh("cpu", (world,))
    full = sharded_tensors()
    state = {
        "rows": distribute_tensor(full["rows"], mesh, [Shard(0)]),
        "cols": distribute_tensor(full["cols"], mesh, [Shard(1)]),
        "bias": distribute_tensor(full["bias"], mesh, [Replicate()]),
    }
    dcp.save(state, storage_writer=HuggingFaceStorageWriter(path="hf_sharded",
                                                             save_distributed=True))
    dist.barrier()
    dist.destroy_process_group()


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "hf_sharded"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    os.chdir(out)
    shutil.rmtree("hf_sharded", ignore_errors=True)
    shutil.rmtree("hf_sharded.expected", ignore_errors=True)
    mp.spawn(save_hf_sharded_rank, args=(2, 29633), nprocs=2, join=True)
    write_expected("hf_sharded", {k: v for k, v in sharded_tensors().items() if k != "grid"})
    if len(argv) == 3:
        return 0
    for case in ("basic", "sharded", "local", "safetensors"):
        shutil.rmtree(case, ignore_errors=True)
        shutil.rmtree(f"{case}.expected", ignore_errors=True)
    save_basic(29631)
    mp.spawn(save_sharded_rank, args=(4, 29632), nprocs=4, join=True)
    write_expected("sharded", sharded_tensors())
    shutil.copytree("sharded.expected", "local.expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
