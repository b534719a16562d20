#!/usr/bin/env python3
"""Hugging Face multi-file checkpoints in: `shardkit shard --checkpoint` and `inspect` take a
`*.safetensors.index.json` or a directory holding one (or holding exactly one .safetensors file),
on 3 ranks. The round trip through `gather` gives back every tensor byte for byte, __metadata__
merged; a bad index (a tensor the map omits, a missing file, a tensor in another file than the
map says, conflicting __metadata__), a directory with two indexes and a shard directory are exit 2
with the same first line on every rank; a total_size that matches nothing is only a warning."""

import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (ITEM_SIZE, TMP, check, expect_every_rank, finish,  # noqa: E402
                                numel, read_safetensors, run, write_safetensors)

WORLD = 3
PLAN = os.path.join(TMP, "hf-plan.json")


def tensor(rng, dtype, shape):
    return (dtype, shape, rng.randbytes(numel(shape) * ITEM_SIZE[dtype]))


def write_hf(directory, files, metadata=None, total_size=None, weight_map=None):
    """files: file name -> {tensor: (dtype, shape, bytes)}; writes them and the index."""
    os.makedirs(directory, exist_ok=True)
    weights = {}
    for name, tensors in files.items():
        write_safetensors(os.path.join(directory, name), tensors, metadata=(metadata or {}).get(name))
        weights.update({t: name for t in tensors})
    index = {"metadata": {"total_size": total_size if total_size is not None else
                          sum(len(b) for ts in files.values() for _, _, b in ts.values())},
             "weight_map": weight_map if weight_map is not None else weights,
             "other": "ignored"}
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump(index, f)
    return path


def shard(checkpoint, out):
    return run(["shard", "--nproc", str(WORLD), "--plan", PLAN, "--checkpoint", checkpoint,
                "--out", out])


def round_trip(label, checkpoint, originals, metadata):
    out = os.path.join(TMP, f"{label}-out")
    r = shard(checkpoint, out)
    if not check(r.returncode == 0, f"{label}: shard exit {r.returncode}: {r.stderr}"):
        return r
    back = os.path.join(TMP, f"{label}-back.safetensors")
    g = run(["gather", "--in", out, "--out", back])
    if not check(g.returncode == 0, f"{label}: gather: {g.stderr}"):
        return r
    _, got_metadata, got = read_safetensors(back)
    check(got == originals, f"{label}: gathered tensors differ: {sorted(got)} vs {sorted(originals)}")
    check(got_metadata == metadata, f"{label}: metadata {got_metadata}")
    return r


def sub_byte(rng):
    """F4 and F6 (packed 4- and 6-bit elements) move byte for byte when every shard starts and
    ends on a byte boundary, and are refused naming the tensor when one does not."""
    tensors = {"f4.cols": ("F4", [4, 6], rng.randbytes(12)),        # rows of 3 bytes
               "f6.rows": ("F6_E2M3", [6, 4], rng.randbytes(18)),   # rows of 3 bytes
               "f4z.cols": ("F4", [2, 4], rng.randbytes(4)),        # 2, 2, 0 columns
               "f6b": ("F6_E3M2", [8], rng.randbytes(6))}            # replicated
    ck = os.path.join(TMP, "sub-byte.safetensors")
    write_safetensors(ck, tensors)
    r = round_trip("sub-byte", ck, tensors, None)
    if r.returncode == 0:
        # Columns 2k, 2k+1 of the F4 matrix are byte k of each row: rank k's shard.
        for rank in range(WORLD):
            _, _, got = read_safetensors(os.path.join(TMP, "sub-byte-out",
                                                      f"rank-{rank:05d}.safetensors"))
            want = bytes(tensors["f4.cols"][2][row * 3 + rank] for row in range(4))
            check(got["f4.cols"] == ("F4", [4, 2], want), f"sub-byte: rank {rank}'s F4 shard")
    bad = os.path.join(TMP, "sub-byte-bad.safetensors")
    write_safetensors(bad, {"f6.cols": ("F6_E2M3", [2, 4], rng.randbytes(6))})
    expect_every_rank("sub-byte cut inside a byte", shard(bad, os.path.join(TMP, "o7")),
                      WORLD, "parameter \"f6.cols\" (F6_E2M3[2, 4]): shard 0")


def main():
    with open(PLAN, "w") as f:
        json.dump({"rules": [
            {"match": "*.rows", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
            {"match": "*.cols", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
        ]}, f)
    rng = random.Random(15)
    files = {
        "model-00001-of-00003.safetensors": {"embed.rows": tensor(rng, "BF16", [7, 6]),
                                             "fp8.cols": tensor(rng, "F8_E4M3", [5, 8])},
        "model-00002-of-00003.safetensors": {"u16.cols": tensor(rng, "U16", [4, 2]),
                                             "norm": tensor(rng, "F32", [6])},
        "model-00003-of-00003.safetensors": {"head.rows": tensor(rng, "F16", [2, 3])},
    }
    originals = {t: v for ts in files.values() for t, v in ts.items()}
    meta = {name: {"format": "pt"} for name in files}
    meta["model-00002-of-00003.safetensors"]["origin"] = "test"
    merged = {"format": "pt", "origin": "test"}
    many = os.path.join(TMP, "hf-many")
    index = write_hf(many, files, metadata=meta)
    round_trip("index", index, originals, merged)
    r = round_trip("directory", many, originals, merged)
    check("warning" not in r.stderr, f"directory: unexpected warning: {r.stderr}")

    # One tensor per file, and a total_size that matches nothing (a warning, not an error).
    single = {f"model-{i + 1:05d}-of-00005.safetensors": {name: value}
              for i, (name, value) in enumerate(sorted(originals.items()))}
    one_each = os.path.join(TMP, "hf-one-each")
    write_hf(one_each, single, total_size=12345)
    r = round_trip("one per file", one_each, originals, None)
    check("metadata.total_size is 12345" in r.stderr, f"total_size warning: {r.stderr}")

    i = run(["inspect", many])
    check(i.returncode == 0 and "model-00003-of-00003.safetensors" in i.stdout and
          "F8_E4M3" in i.stdout and "U16" in i.stdout, f"inspect of the directory: {i.stdout}")

    # A directory holding exactly one plain .safetensors file is that file.
    plain = os.path.join(TMP, "hf-plain")
    os.makedirs(plain)
    write_safetensors(os.path.join(plain, "model.safetensors"), originals)
    round_trip("plain directory", plain, originals, None)

    bad = os.path.join(TMP, "hf-conflict")
    write_hf(bad, files, metadata={n: {"format": n[:11]} for n in files})
    expect_every_rank("conflicting metadata", shard(bad, os.path.join(TMP, "o1")),
                      WORLD, "__metadata__ key \"format\"")
    omitted = dict((t, f) for f, ts in files.items() for t in ts if t != "norm")
    bad = os.path.join(TMP, "hf-omitted")
    write_hf(bad, files, weight_map=omitted)
    expect_every_rank("tensor the map omits", shard(bad, os.path.join(TMP, "o2")),
                      WORLD, "holds tensor \"norm\", which the weight_map does not list")
    moved = dict(omitted, norm="model-00001-of-00003.safetensors")
    bad = os.path.join(TMP, "hf-moved")
    write_hf(bad, files, weight_map=moved)
    expect_every_rank("tensor in another file", shard(bad, os.path.join(TMP, "o3")),
                      WORLD, "but it is in model-00002-of-00003.safetensors")
    listed = dict(moved, ghost="model-00001-of-00003.safetensors")
    bad = os.path.join(TMP, "hf-ghost")
    write_hf(bad, files, weight_map=dict(listed, norm="model-00002-of-00003.safetensors"))
    expect_every_rank("a listed tensor no file holds", shard(bad, os.path.join(TMP, "o8")), WORLD,
                      "puts tensor \"ghost\" in model-00001-of-00003.safetensors, which has no such")
    bad = os.path.join(TMP, "hf-missing")
    write_hf(bad, files)
    os.remove(os.path.join(bad, "model-00003-of-00003.safetensors"))
    expect_every_rank("missing file", shard(bad, os.path.join(TMP, "o4")), WORLD, "no such file")
    bad = os.path.join(TMP, "hf-two")
    write_hf(bad, files)
    shutil.copy(os.path.join(bad, "model.safetensors.index.json"),
                os.path.join(bad, "other.safetensors.index.json"))
    expect_every_rank("two indexes", shard(bad, os.path.join(TMP, "o5")),
                      WORLD, "holds 2 Hugging Face indexes")
    expect_every_rank("a shard directory",
                      shard(os.path.join(TMP, "index-out"), os.path.join(TMP, "o6")), WORLD,
                      "use 'shardkit reshard'")
    sub_byte(rng)
    for name in ("o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8"):
        check(not os.path.exists(os.path.join(TMP, name, "index.json")), f"{name}: index.json")
    finish("hf checkpoint")


if __name__ == "__main__":
    main()
