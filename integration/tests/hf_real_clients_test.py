#!/usr/bin/env python3
"""shardkit against the libraries users have (PyPI's safetensors, numpy, huggingface_hub, from the
.venv that `tools/setup --test-venv` makes; `tools/test` passes its python as
SHARDKIT_TEST_PYTHON): a multi-file checkpoint split the way Hugging Face splits state dicts
(`split_state_dict_into_shards_factory`, `model-0000k-of-0000n.safetensors` + index) and written
with `safetensors.numpy`, sharded on 3 ranks; every rank file read back with `safe_open` equals
numpy slicing of the original, and `gather`'s output read with `safe_open` equals the original.
Without the environment it says so and passes (skipped)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 3


def main_with_clients():
    import numpy as np
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors import safe_open
    from safetensors.numpy import save_file
    sys.path.insert(0, HERE)
    from checkpoint_testlib import BIN, TMP, check, finish

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

    plan = os.path.join(TMP, "hf-real-plan.json")
    with open(plan, "w") as f:
        json.dump({"rules": [
            {"match": "*.rows", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
            {"match": "*.cols", "spec": {"type": "chunk", "dim": 1,
                                         "placements": ["rank:2", "rank:0", "rank:1"]}}]}, f)
    out = os.path.join(TMP, "hf-real-out")
    r = subprocess.run([BIN, "shard", "--nproc", str(WORLD), "--plan", plan, "--checkpoint", ckpt,
                        "--out", out, "--memory-mib", "1"], capture_output=True, text=True,
                       timeout=120)
    if not check(r.returncode == 0, f"shard: {r.stderr}"):
        return finish("real clients")
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    for name, entry in index["parameters"].items():
        for shard in entry["shards"]:
            with safe_open(os.path.join(out, shard["file"]), framework="np") as rank_file:
                got = rank_file.get_tensor(shard["tensor"])
            region = tuple(slice(o, o + s) for o, s in zip(shard["offsets"], shard["sizes"]))
            check(got.dtype == state[name].dtype and np.array_equal(got, state[name][region]),
                  f"{name} shard on rank {shard['rank']} differs from numpy slicing")
    back = os.path.join(TMP, "hf-real-back.safetensors")
    g = subprocess.run([BIN, "gather", "--in", out, "--out", back], capture_output=True, text=True,
                       timeout=120)
    if check(g.returncode == 0, f"gather: {g.stderr}"):
        with safe_open(back, framework="np") as gathered:
            check(sorted(gathered.keys()) == sorted(state), f"gathered names {gathered.keys()}")
            check(gathered.metadata() == {"format": "np"}, f"metadata {gathered.metadata()}")
            for name, array in state.items():
                got = gathered.get_tensor(name)
                check(got.dtype == array.dtype and np.array_equal(got, array), f"{name} differs")
    finish("real clients")


def main():
    python = os.environ.get("SHARDKIT_TEST_PYTHON")
    if os.environ.get("HF_REAL_CLIENTS") == "1":
        return main_with_clients()
    if not python or subprocess.run([python, "-c", "import safetensors, numpy, huggingface_hub"],
                                    capture_output=True).returncode != 0:
        print("skipped: no SHARDKIT_TEST_PYTHON with safetensors, numpy and huggingface_hub "
              "(run ./tools/test, which makes .venv with tools/setup --test-venv)")
        return 0
    env = dict(os.environ, HF_REAL_CLIENTS="1")
    return subprocess.run([python, os.path.abspath(__file__)], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
