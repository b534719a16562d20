#!/usr/bin/env python3
"""Shard directories for torch's HuggingFaceStorageReader: every rank file's __metadata__ carries
DCP_SHARDING_INFO, the offsets of each of its tensors, so that torch 2.15 can `dcp.load` a shardkit
shard directory straight into whole tensors.

- Without torch: `shard` on 3 ranks (rows cut on dim 0, columns on dim 1, a zero-size shard, a
  replicated vector and scalar) of a checkpoint that carries a DCP_SHARDING_INFO of its own (as
  torch's HuggingFaceStorageWriter writes one): each rank file holds exactly its offsets, the
  checkpoint's own key replaced, the other keys kept, index.json's metadata the checkpoint's;
  `reshard` onto 2 ranks, other dims: the same for its layout; `gather` of that gives back the
  checkpoint's own metadata, byte for byte.
- With PyPI's torch 2.15 (SHARDKIT_TEST_PYTHON): `dcp.load(..., storage_reader=
  HuggingFaceStorageReader(DIR), no_dist=True)` of both directories equals the checkpoint; a
  replicated parameter is read once per rank file; what docs/checkpoints.md says of NAME#K tensors
  (several shards of one parameter on one rank) holds: a missing key, a size mismatch, or rows
  left as they were. Recorded as skipped, with the reason, without torch.
"""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 3
# name: (dtype, shape, little-endian item format)
SHAPES = {"rows": ("F32", [7, 4], "<f"), "cols": ("F32", [3, 8], "<f"), "tiny": ("F32", [2], "<f"),
          "norm": ("F32", [5], "<f"), "step": ("I64", [], "<q")}
# As torch's HuggingFaceStorageWriter writes a world-1 checkpoint: its own offsets, all zero.
OWN_INFO = json.dumps({name: {"saved_offsets": [0] * len(shape)}
                       for name, (_, shape, _) in SHAPES.items()})
METADATA = {"format": "pt", "DCP_VERSION": "1.0", "DCP_SHARDING_INFO": OWN_INFO}
EVERY = {"ranks": "all"}


def values(name):
    _, shape, _ = SHAPES[name]
    n = 1
    for d in shape:
        n *= d
    return [float(100 * len(name) + i) for i in range(n)]


def checkpoint():
    return {name: (dtype, shape, struct.pack(f"<{len(values(name))}{fmt[1]}",
                                             *([int(v) for v in values(name)] if fmt == "<q"
                                               else values(name))))
            for name, (dtype, shape, fmt) in SHAPES.items()}


def chunk(dim):
    return {"type": "chunk", "dim": dim, "placements": EVERY}


def offsets(per_rank):
    """{rank: {tensor: {"saved_offsets": offsets}}} from {tensor: [offsets of rank 0, 1, ...]}."""
    out = {}
    for tensor, by_rank in per_rank.items():
        for rank, at in enumerate(by_rank):
            out.setdefault(rank, {})[tensor] = {"saved_offsets": at}
    return out


# shard, 3 ranks: rows [7, 4] on dim 0 (3, 3, 1), cols [3, 8] on dim 1 (3, 3, 2), tiny [2] on
# dim 0 (1, 1, 0: rank 2's shard is empty, at offset 2), norm and step replicated.
SHARD_RULES = [{"match": "rows", "spec": chunk(0)}, {"match": "cols", "spec": chunk(1)},
               {"match": "tiny", "spec": chunk(0)}]
SHARD_INFO = offsets({"rows": [[0, 0], [3, 0], [6, 0]], "cols": [[0, 0], [0, 3], [0, 6]],
                      "tiny": [[0], [1], [2]], "norm": [[0]] * 3, "step": [[]] * 3})
# reshard onto 2 ranks: rows on dim 1 (2, 2), cols on dim 0 (2, 1), norm on dim 0 (3, 2), tiny
# and step replicated.
RESHARD_RULES = [{"match": "rows", "spec": chunk(1)}, {"match": "cols", "spec": chunk(0)},
                 {"match": "norm", "spec": chunk(0)}]
RESHARD_INFO = offsets({"rows": [[0, 0], [0, 2]], "cols": [[0, 0], [2, 0]], "norm": [[0], [3]],
                        "tiny": [[0]] * 2, "step": [[]] * 2})


def check_rank_files(out, world, want_info, label):
    """Each rank file: the checkpoint's metadata, its DCP_SHARDING_INFO replaced by the file's own
    offsets (`want_info[rank]`); index.json's metadata the checkpoint's, unchanged."""
    from checkpoint_testlib import check, read_safetensors
    with open(os.path.join(out, "index.json")) as f:
        check(json.load(f)["metadata"] == METADATA, f"{label}: index.json metadata changed")
    for rank in range(world):
        _, metadata, tensors = read_safetensors(os.path.join(out, f"rank-{rank:05d}.safetensors"))
        metadata = dict(metadata or {})
        info = json.loads(metadata.pop("DCP_SHARDING_INFO", "null"))
        check(info == want_info[rank], f"{label}: rank {rank} DCP_SHARDING_INFO {info}")
        check(set(info or {}) == set(tensors), f"{label}: rank {rank} holds {sorted(tensors)}")
        check(metadata == {k: v for k, v in METADATA.items() if k != "DCP_SHARDING_INFO"},
              f"{label}: rank {rank} other metadata {metadata}")


def shardkit(args, label):
    from checkpoint_testlib import check, run
    r = run(args, timeout=120)
    return check(r.returncode == 0, f"{label}: exit {r.returncode}: {r.stderr}")


def write_directories():
    """shard (3 ranks) and reshard (2 ranks) of the checkpoint, checked; gather of the second
    equals the checkpoint, metadata included. Returns the two directories."""
    from checkpoint_testlib import check, read_safetensors, tmp_path, write_json, write_safetensors
    ck = tmp_path("model.safetensors")
    write_safetensors(ck, checkpoint(), METADATA)
    sharded, resharded = tmp_path("sharded"), tmp_path("resharded")
    if shardkit(["shard", "--checkpoint", ck, "--plan",
                 write_json("p3.json", {"rules": SHARD_RULES}), "--out", sharded, "--nproc",
                 str(WORLD)], "shard"):
        check_rank_files(sharded, WORLD, SHARD_INFO, "shard")
    if shardkit(["reshard", "--in", sharded, "--plan",
                 write_json("p2.json", {"rules": RESHARD_RULES}), "--out", resharded, "--nproc",
                 "2"], "reshard"):
        check_rank_files(resharded, 2, RESHARD_INFO, "reshard")
    back = tmp_path("back.safetensors")
    if shardkit(["gather", "--in", resharded, "--out", back], "gather"):
        _, metadata, tensors = read_safetensors(back)
        check(metadata == METADATA, f"gather: __metadata__ {metadata}")
        check(tensors == checkpoint(), "gather: tensors differ from the checkpoint")
    return sharded, resharded


def whole(torch):
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    return {name: torch.tensor(values(name), dtype=dtypes[dtype]).reshape(shape)
            for name, (dtype, shape, _) in SHAPES.items()}


def hf_load(torch, directory, state):
    """dcp.load into `state` with torch's HuggingFaceStorageReader, no process group; returns the
    (tensor, file) of every read."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    reads = []

    class Counting(HuggingFaceStorageReader):
        def _process_read_request(self, f, req, planner):
            reads.append(req.storage_index.fqn)
            return super()._process_read_request(f, req, planner)

    dcp.load(state, storage_reader=Counting(directory), no_dist=True)
    return reads


def name_k_cases(torch):
    """Several shards of one parameter on one rank (NAME#K): what docs/checkpoints.md says."""
    from checkpoint_testlib import check, tmp_path, write_json, write_safetensors
    ck = tmp_path("w.safetensors")
    write_safetensors(ck, {"w": ("F32", [6, 5], struct.pack("<30f", *range(1, 31)))})
    # NAME#K tensors are left out of DCP_SHARDING_INFO: torch's reader refuses the directory,
    # naming the first such tensor, wherever the plainly named shards lie (the last case used to
    # load without an error, rows 0-3 unread).
    for label, ranks, world, outcome in [
            ("all on rank 0", [0, 0, 0], 1, "w#0"),
            ("middle alone", [0, 1, 0], 2, "w#0"),
            ("last alone", [0, 0, 1], 2, "w#0")]:
        shards = [{"offsets": [2 * k, 0], "sizes": [2, 5], "placement": f"rank:{r}"}
                  for k, r in enumerate(ranks)]
        plan = write_json("w.json", {"rules": [{"match": "w", "spec": {"type": "enumerable",
                                                                       "shards": shards}}]})
        out = tmp_path(f"w-{world}-{''.join(map(str, ranks))}")
        if not shardkit(["shard", "--checkpoint", ck, "--plan", plan, "--out", out, "--nproc",
                         str(world)], f"NAME#K {label}"):
            continue
        state = {"w": torch.full((6, 5), -1.0)}
        try:
            hf_load(torch, out, state)
            error = None
        except BaseException as e:  # torch's CheckpointException is a BaseException
            error = str(e)
        check(error is not None and outcome in error, f"NAME#K {label}: {error}")
        check(bool((state["w"] == -1).all()), f"NAME#K {label}: loaded part: {state['w']}")


def main_with_torch():
    import torch
    from checkpoint_testlib import check, finish
    sharded, resharded = write_directories()
    want = whole(torch)
    for directory, world in ((sharded, WORLD), (resharded, 2)):
        label = os.path.basename(directory)
        state = {name: torch.zeros_like(tensor) for name, tensor in want.items()}
        try:
            reads = hf_load(torch, directory, state)
        except BaseException as e:
            check(False, f"{label}: dcp.load with HuggingFaceStorageReader: {e}")
            continue
        for name, tensor in want.items():
            check(state[name].dtype == tensor.dtype and torch.equal(state[name], tensor),
                  f"{label}: {name} differs: {state[name]}")
        # A replicated parameter's copy is read once per rank file (all from one of them).
        replicated = {"sharded": ["norm", "step"], "resharded": ["tiny", "step"]}[label]
        for name in replicated:
            check(reads.count(name) == world, f"{label}: {name} read {reads.count(name)} times")
    name_k_cases(torch)
    finish("hf reader")


def main():
    sys.path.insert(0, HERE)
    if os.environ.get("HF_READER_TORCH") == "1":
        return main_with_torch()
    from checkpoint_testlib import finish, rerun_with_clients
    write_directories()
    code = rerun_with_clients(__file__, "HF_READER_TORCH", "hf reader torch",
                              ("torch", "safetensors"))
    finish("hf reader rank files")
    return code


if __name__ == "__main__":
    sys.exit(main())
