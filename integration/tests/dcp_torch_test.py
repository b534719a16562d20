#!/usr/bin/env python3
"""PyTorch DCP in and out of the real binary, checked with PyPI's torch 2.15 itself (the .venv
that `tools/setup --test-venv` makes; `tools/test` passes its python as SHARDKIT_TEST_PYTHON).

- torch saves a DCP checkpoint on 2 gloo ranks (and on 3 and 4: uneven and empty chunks; those are
  gathered and resharded to 2 ranks, each compared with torch's own consolidation) (DTensors: F32 rows Shard(0) uneven, BF16 and F16
  Shard(1), I64 Shard(0), FP8 e4m3 Shard(0), a replicated F32 vector, a non-tensor `step`, and
  an optimizer-like nested dict: a tensor `optim.state.exp_avg` beside non-tensor items);
  `shardkit gather` of it equals torch's own `dcp_to_torch_save` tensor for tensor, byte for byte.
- `shardkit reshard --format dcp` of it onto 3 ranks, other dims: torch's `dcp.load` on 2 ranks
  reads it into a third layout (every tensor Shard(1) or Replicate), equal to the original.
- `shardkit reshard` (the default format) then `gather`: equal again; `gather --format dcp`:
  `dcp.load(no_dist=True)` and `dcp_to_torch_save` read it (flat names).
- `shardkit shard --strategy direct --format dcp` of a safetensors file written by torch: read by
  `dcp.load(no_dist=True)`, equal.
Without torch in that environment the test is recorded as skipped, with the reason.
"""

import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {  # name: (dtype name, shape, placement when torch saves: 0/1 = Shard(d), None = Replicate)
    "model.embed.weight": ("float32", [7, 6], 0),
    "model.layers.0.proj.weight": ("bfloat16", [6, 9], 1),
    "model.layers.0.ids": ("int64", [5, 4], 0),
    "model.layers.0.fp8.weight": ("float8_e4m3fn", [8, 4], 0),
    "model.norm.weight": ("float32", [6], None),
    "model.layers.0.f16": ("float16", [5, 3], 1),
    # Saved nested, as an optimizer's state is: {"optim": {"state": {"exp_avg": ...}, "step": 3,
    # "param_groups": [{"lr": 0.5}]}}; DCP flattens the name, the non-tensor items are skipped.
    "optim.state.exp_avg": ("float32", [7, 6], 0),
}


def expected(torch):
    out = {}
    for name, (dtype, shape, _) in SHAPES.items():
        n = 1
        for d in shape:
            n *= d
        base = torch.arange(n, dtype=torch.float32).reshape(shape)
        if dtype == "int64":
            out[name] = (base.to(torch.int64) * 1000003) - 7
        elif dtype == "float8_e4m3fn":
            out[name] = ((base % 16) / 4).to(torch.float8_e4m3fn)
        else:
            out[name] = (base / 8 - 1).to(getattr(torch, dtype))
    return out


def raw(torch, tensor):
    return tensor.contiguous().view(torch.uint8).flatten().tolist()



def local_chunk(torch, full, placement, rank, world):
    """This rank's part of `full` under Shard(placement) (torch.chunk's split, as DTensor's), or
    all of it (None: Replicate)."""
    if placement is None:
        return full.clone()
    parts = torch.chunk(full, world, dim=placement)
    if rank < len(parts):
        return parts[rank].clone()
    shape = list(full.shape)
    shape[placement] = 0
    return torch.empty(shape, dtype=full.dtype)


def make_dtensor(torch, full, mesh, placement, rank, world):
    """A DTensor of `full` built from this rank's own part (no collective: gloo moves no FP8)."""
    from torch.distributed.tensor import DTensor, Replicate, Shard
    return DTensor.from_local(local_chunk(torch, full, placement, rank, world), mesh,
                              [Replicate() if placement is None else Shard(placement)],
                              run_check=False, shape=full.shape, stride=full.stride())


def rank_main(rank, world, port, job, directory, result):
    """One torch rank: `save` the checkpoint, or `load` it into a third layout and compare this
    rank's parts (no gather: gloo moves no FP8)."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    want = expected(torch)
    ok = []
    if job == "save":
        state = {name: make_dtensor(torch, want[name], mesh, p, rank, world)
                 for name, (_, _, p) in SHAPES.items() if not name.startswith("optim.")}
        state["step"] = 7
        state["optim"] = {"state": {"exp_avg": make_dtensor(
            torch, want["optim.state.exp_avg"], mesh, SHAPES["optim.state.exp_avg"][2], rank,
            world)}, "step": 3, "param_groups": [{"lr": 0.5}]}
        dcp.save(state, checkpoint_id=directory)
    else:  # load into another layout: Shard(1) where there is a dim 1, else Replicate
        layout = {name: 1 if len(shape) > 1 else None for name, (_, shape, _) in SHAPES.items()}
        state = {name: make_dtensor(torch, torch.zeros_like(want[name]), mesh, layout[name], rank,
                                    world) for name in SHAPES}
        dcp.load(state, checkpoint_id=directory)
        for name in SHAPES:
            got = state[name].to_local()
            mine = local_chunk(torch, want[name], layout[name], rank, world)
            ok.append([name, rank, got.dtype == mine.dtype and raw(torch, got) == raw(torch, mine)])
    dist.barrier()
    dist.destroy_process_group()
    with open(f"{result}.{rank}", "w") as f:
        json.dump(ok, f)


def run_torch_ranks(world, job, directory):
    import torch.multiprocessing as mp
    from checkpoint_testlib import TMP, free_port
    result = os.path.join(TMP, f"torch-{job}-{os.path.basename(directory)}.json")
    mp.spawn(rank_main, args=(world, free_port(), job, directory, result), nprocs=world)
    out = []
    for rank in range(world):
        with open(f"{result}.{rank}") as f:
            out += json.load(f)
    return out


def flat_tensors(torch, tree, prefix=""):
    """{dotted name: tensor} of a nested state dict (dcp_to_torch_save's), other values left out."""
    out = {}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(value, (dict, list)):
            out.update(flat_tensors(torch, value, name + "."))
    return out


def shardkit(args, label):
    from checkpoint_testlib import BIN, check
    r = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"{label}: exit {r.returncode}: {r.stderr}")
    return r.returncode == 0


def compare(torch, got, label):
    from checkpoint_testlib import check
    want = expected(torch)
    check(sorted(got) == sorted(want), f"{label}: names {sorted(got)}")
    for name, tensor in want.items():
        if name in got:
            check(got[name].dtype == tensor.dtype and raw(torch, got[name]) == raw(torch, tensor),
                  f"{label}: {name} differs")


def load_no_dist(torch, directory):
    import torch.distributed.checkpoint as dcp
    want = expected(torch)
    state = {name: torch.zeros_like(tensor) for name, tensor in want.items()}
    dcp.load(state, checkpoint_id=directory, no_dist=True)
    return state


def plan(name, rules):
    from checkpoint_testlib import write_json
    every = {"ranks": "all"}
    return write_json(name, {"rules": [{"match": m, "spec": {"type": "chunk", "dim": d,
                                                             "placements": every}}
                                       for m, d in rules]})


def main_with_torch():
    import torch
    from safetensors.torch import load_file, save_file
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from checkpoint_testlib import check, finish, tmp_path
    saved = tmp_path("torch-dcp")
    run_torch_ranks(2, "save", saved)
    # gather equals torch's own consolidation.
    torch_pt = tmp_path("torch.pt")
    dcp_to_torch_save(saved, torch_pt)
    consolidated = flat_tensors(torch, torch.load(torch_pt))
    compare(torch, consolidated, "dcp_to_torch_save of torch's checkpoint")
    if shardkit(["gather", "--in", saved, "--out", tmp_path("g.safetensors")], "gather DCP"):
        gathered = load_file(tmp_path("g.safetensors"))
        compare(torch, gathered, "gather of torch's DCP")
        check(all(raw(torch, gathered[k]) == raw(torch, consolidated[k]) for k in consolidated),
              "gather differs from dcp_to_torch_save")
    # reshard to DCP on 3 ranks, other dims; torch loads it on 2 ranks into a third layout.
    p3 = plan("p3.json", [("*.embed.weight", 1), ("*.proj.weight", 0), ("*.ids", 1),
                          ("*.fp8.weight", 1), ("*.norm.weight", 0)])
    re_dcp = tmp_path("re-dcp")
    if shardkit(["reshard", "--in", saved, "--plan", p3, "--out", re_dcp, "--format", "dcp",
                 "--nproc", "3"], "reshard --format dcp"):
        loaded = run_torch_ranks(2, "load", re_dcp)
        check(len(loaded) == 2 * len(SHAPES) and all(same for _, _, same in loaded),
              f"dcp.load of shardkit's DCP into a third layout: {loaded}")
        compare(torch, load_no_dist(torch, re_dcp), "dcp.load(no_dist) of shardkit's DCP")
    # the default format, gathered back; gather --format dcp read by torch.
    re_dir = tmp_path("re-shardkit")
    if shardkit(["reshard", "--in", saved, "--plan", p3, "--out", re_dir, "--nproc", "3"],
                "reshard"):
        if shardkit(["gather", "--in", re_dir, "--out", tmp_path("g2.safetensors")], "gather"):
            compare(torch, load_file(tmp_path("g2.safetensors")), "reshard then gather")
        one = tmp_path("one-rank-dcp")
        if shardkit(["gather", "--in", re_dir, "--out", one, "--format", "dcp"],
                    "gather --format dcp"):
            compare(torch, load_no_dist(torch, one), "dcp.load of gather --format dcp")
            dcp_to_torch_save(one, tmp_path("one.pt"))
            compare(torch, torch.load(tmp_path("one.pt")), "dcp_to_torch_save of gather's DCP")
    # torch saving on 3 and 4 ranks: uneven chunks, and at 4 ranks empty ones (5 rows in chunks of
    # 2: rank 3 holds none); gathered and resharded to 2 ranks, equal to torch's consolidation.
    for world in (3, 4):
        saved_w = tmp_path(f"torch-dcp-{world}")
        run_torch_ranks(world, "save", saved_w)
        dcp_to_torch_save(saved_w, tmp_path(f"torch-{world}.pt"))
        compare(torch, flat_tensors(torch, torch.load(tmp_path(f"torch-{world}.pt"))),
                f"dcp_to_torch_save of torch's {world}-rank checkpoint")
        gathered_w = tmp_path(f"g{world}.safetensors")
        if shardkit(["gather", "--in", saved_w, "--out", gathered_w], f"gather {world}-rank DCP"):
            compare(torch, load_file(gathered_w), f"gather of torch's {world}-rank DCP")
        p2 = plan(f"p2-{world}.json", [("**.weight", 0), ("**.ids", 1), ("**.exp_avg", 1)])
        re_w = tmp_path(f"re-dcp-{world}")
        if shardkit(["reshard", "--in", saved_w, "--plan", p2, "--out", re_w, "--format", "dcp",
                     "--nproc", "2"], f"reshard {world}-rank DCP to 2 ranks"):
            compare(torch, load_no_dist(torch, re_w), f"dcp.load of {world} -> 2 ranks")
    # a safetensors checkpoint straight to DCP, every rank reading its own shards.
    st = tmp_path("model.safetensors")
    save_file(expected(torch), st)
    direct = tmp_path("direct-dcp")
    if shardkit(["shard", "--checkpoint", st, "--plan", p3, "--out", direct, "--format", "dcp",
                 "--strategy", "direct", "--nproc", "2"], "shard --format dcp"):
        compare(torch, load_no_dist(torch, direct), "dcp.load of shard --format dcp")
    finish("dcp torch")


def main():
    if os.environ.get("DCP_TORCH") == "1":
        return main_with_torch()
    sys.path.insert(0, HERE)
    from checkpoint_testlib import rerun_with_clients
    return rerun_with_clients(__file__, "DCP_TORCH", "dcp torch", ("torch", "safetensors"))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
