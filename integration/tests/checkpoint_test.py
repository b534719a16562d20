#!/usr/bin/env python3
"""End to end: `shardkit shard` (1-4 ranks, every strategy) -> output layout -> `gather` gives
back the original bytes; `direct`'s rank files are byte-identical to `scatter`'s; `inspect`
tables. Runs the real binary."""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (ITEM_SIZE, TMP, cells, check, expected_rank_metadata, extract,
                                finish, numel, rank_metadata, read_safetensors, run,
                                same_rank_files, write_safetensors)

METADATA = {"format": "pt", "note": "shardkit e2e"}


def make_checkpoint():
    rng = random.Random(6)
    specs = {
        "embed.weight": ("F32", [10, 8]),
        "layers.0.attn.qkv.weight": ("BF16", [7, 5]),
        "layers.1.attn.qkv.weight": ("F16", [2, 3]),
        "layers.0.mlp.weight": ("I32", [6, 4]),
        "twice.weight": ("I64", [5]),
        "bias": ("I8", [9]),
        "empty.weight": ("F32", [0, 4]),
        "norm.weight": ("F64", [4]),
        "mask": ("BOOL", [3, 3]),
        "scale": ("I16", []),
        "bytes": ("U8", [3, 2]),
        # Every other safetensors byte dtype, cut on dim 1 (rows of pieces) or dim 0; [3, 1] on
        # dim 1 gives zero-size shards from 2 ranks on.
        "dt.u16.d1": ("U16", [4, 6]),
        "dt.u32.d0": ("U32", [5, 3]),
        "dt.u64.d0": ("U64", [3]),
        "dt.c64.d1": ("C64", [2, 5]),
        "dt.f8e4m3.d1": ("F8_E4M3", [6, 7]),
        "dt.f8e5m2.d0": ("F8_E5M2", [7, 4]),
        "dt.f8e8m0.d0": ("F8_E8M0", [5]),
        "dt.f8e4m3fnuz.d1": ("F8_E4M3FNUZ", [2, 9]),
        "dt.f8e5m2fnuz.d1": ("F8_E5M2FNUZ", [3, 1]),
    }
    tensors = {}
    for name, (dtype, shape) in specs.items():
        n = numel(shape) * ITEM_SIZE[dtype]
        blob = bytes(rng.randrange(2) for _ in range(n)) if dtype == "BOOL" else rng.randbytes(n)
        tensors[name] = (dtype, shape, blob)
    return tensors


def make_plan(world):
    last = world - 1
    every = {"ranks": "all", "device": "cpu"}
    rules = [
        {"match": "embed.weight", "spec": {"type": "chunk", "dim": 1, "placements": every}},
        {"match": "layers.*.attn.qkv.weight", "spec": {"type": "chunk", "dim": 0, "placements": every}},
        {"match": "layers.*.mlp.weight", "spec": {"type": "enumerable", "shards": [
            {"offsets": [0, 0], "sizes": [3, 2], "placement": "rank:0/cpu"},
            {"offsets": [0, 2], "sizes": [3, 2], "placement": f"rank:{1 % world}/cpu"},
            {"offsets": [3, 0], "sizes": [3, 4], "placement": f"rank:{last}"}]}},
        {"match": "twice.*", "spec": {"type": "chunk", "dim": 0,
                                      "placements": ["rank:0", f"rank:{1 % world}", "rank:0"]}},
        {"match": "bias", "spec": {"type": "chunk", "dim": -1, "placements": every}},
        {"match": "empty.*", "spec": {"type": "chunk", "dim": 0, "placements": every}},
        {"match": "dt.*.d0", "spec": {"type": "chunk", "dim": 0, "placements": every}},
        {"match": "dt.*.d1", "spec": {"type": "chunk", "dim": 1, "placements": every}},
        {"match": "**.unused", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}},
    ]
    path = os.path.join(TMP, f"plan{world}.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "src_rank": 0, "strategy": "scatter", "rules": rules}, f)
    return path


def check_rank_files(out, index, original, world, label):
    held = {rank: {} for rank in range(world)}  # rank -> tensor name -> (parameter, shard)
    for name, entry in index["parameters"].items():
        for k, shard in enumerate(entry["shards"]):
            rank = shard["rank"]
            count = sum(1 for s in entry["shards"] if s["rank"] == rank)
            want_tensor = name if count < 2 else f"{name}#{k}"
            check(shard["tensor"] == want_tensor, f"{label}: {name} shard {k} named {shard['tensor']}")
            check(shard["file"] == f"rank-{rank:05d}.safetensors", f"{label}: {name} shard file")
            held[rank][shard["tensor"]] = (name, shard)
    for rank in range(world):
        text, metadata, tensors = read_safetensors(os.path.join(out, f"rank-{rank:05d}.safetensors"))
        # The checkpoint's __metadata__ (index.json's), in every rank file, and the file's
        # DCP_SHARDING_INFO: its tensors' offsets as index.json lists them.
        check(rank_metadata(metadata) == expected_rank_metadata(index, rank),
              f"{label}: rank {rank} __metadata__ {metadata}")
        check(set(tensors) == set(held[rank]),
              f"{label}: rank {rank} holds {sorted(tensors)}, index says {sorted(held[rank])}")
        if not held[rank]:
            check(text.strip() == "{}", f"{label}: empty rank file header {text!r}")
        for tensor, (name, shard) in held[rank].items():
            if tensor not in tensors:
                continue
            dtype, shape, blob = original[name]
            want = extract(blob, shape, ITEM_SIZE[dtype], shard["offsets"], shard["sizes"])
            got_dtype, got_shape, got = tensors[tensor]
            check((got_dtype, got_shape) == (dtype, shard["sizes"]),
                  f"{label}: rank {rank} {tensor} is {got_dtype}{got_shape}")
            check(got == want, f"{label}: rank {rank} {tensor} bytes differ")


def check_index(out, original, world, strategy, label):
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    want_head = {"format": "shardkit-shards", "version": 1, "world_size": world, "src_rank": 0,
                 "strategy": strategy, "metadata": METADATA}
    for key, value in want_head.items():
        check(index.get(key) == value, f"{label}: index {key} = {index.get(key)!r}")
    check(set(index) == set(want_head) | {"parameters"}, f"{label}: index keys {sorted(index)}")
    check(sorted(index["parameters"]) == sorted(original), f"{label}: parameters")
    for name, entry in index["parameters"].items():
        check(set(entry) == {"dtype", "shape", "spec", "fingerprint", "shards"}, f"{label}: {name} keys")
        check((entry["dtype"], entry["shape"]) == original[name][:2], f"{label}: {name} dtype/shape")
        check(entry["fingerprint"].startswith("sha256:") and len(entry["fingerprint"]) == 71,
              f"{label}: {name} fingerprint")
        replicated = name in ("norm.weight", "mask", "scale", "bytes")
        check((entry["spec"] == "replicated") == replicated, f"{label}: {name} spec {entry['spec']}")
        if replicated:
            check([s["rank"] for s in entry["shards"]] == list(range(world)), f"{label}: {name} ranks")
    return index


def check_world_three(index, label):
    embed = index["parameters"]["embed.weight"]
    check(embed["spec"] == {"dim": 1, "placements": ["rank:0/cpu", "rank:1/cpu", "rank:2/cpu"],
                            "type": "chunk", "version": 1}, f"{label}: embed spec {embed['spec']}")
    check([(s["offsets"], s["sizes"], s["rank"]) for s in embed["shards"]] ==
          [([0, 0], [10, 3], 0), ([0, 3], [10, 3], 1), ([0, 6], [10, 2], 2)], f"{label}: embed shards")
    twice = [s["tensor"] for s in index["parameters"]["twice.weight"]["shards"]]
    check(twice == ["twice.weight#0", "twice.weight", "twice.weight#2"], f"{label}: twice {twice}")
    qkv1 = index["parameters"]["layers.1.attn.qkv.weight"]["shards"]
    check(qkv1[2]["sizes"] == [0, 3] and qkv1[2]["offsets"] == [2, 0], f"{label}: zero-size shard")
    bias = index["parameters"]["bias"]["spec"]
    check(bias["dim"] == 0, f"{label}: bias dim -1 bound to {bias['dim']}")


def check_inspect(ck, out):
    r = run(["inspect", ck])
    check(r.returncode == 0 and r.stderr == "", f"inspect file: rc {r.returncode}, stderr {r.stderr!r}")
    lines = r.stdout.splitlines()
    check(cells(lines[0]) == ["name", "dtype", "shape", "bytes"], f"inspect file header {lines[0]!r}")
    check(["embed.weight", "F32", "[10, 8]", "320"] in [cells(l) for l in lines],
          "inspect file: embed.weight row")
    check(["metadata", "format", "pt"] in [cells(l) for l in lines], "inspect file: metadata row")
    r = run(["inspect", out])
    check(r.returncode == 0 and r.stderr == "", f"inspect dir: rc {r.returncode}, stderr {r.stderr!r}")
    rows = [cells(l) for l in r.stdout.splitlines()]
    check(rows[0] == ["name", "dtype", "shape", "bytes", "spec", "rank 0", "rank 1", "rank 2"],
          f"inspect dir header {rows[0]}")
    for row in (["embed.weight", "F32", "[10, 8]", "320", "chunk(dim=1)", "[10, 3]", "[10, 3]", "[10, 2]"],
                ["twice.weight", "I64", "[5]", "40", "chunk(dim=0)", "[2]+[1]", "[2]", "-"],
                ["mask", "BOOL", "[3, 3]", "9", "replicated", "[3, 3]", "[3, 3]", "[3, 3]"],
                ["layers.0.mlp.weight", "I32", "[6, 4]", "96", "enumerable(3)", "[3, 2]", "[3, 2]", "[3, 4]"],
                ["world_size", "3"], ["strategy", "scatter"], ["metadata", "note", "shardkit e2e"]):
        check(row in rows, f"inspect dir: missing row {row} in {r.stdout}")


def shard(ck, plan, out, world, strategy, nproc=True):
    args = ["shard", "--plan", plan, "--checkpoint", ck, "--out", out, "--strategy", strategy]
    if nproc:
        args += ["--nproc", str(world)]
    return run(args)


def round_trips(ck, original):
    for world in (1, 2, 3, 4):
        plan = make_plan(world)
        for strategy in ("scatter", "broadcast", "direct"):
            label = f"world {world} {strategy}"
            out = os.path.join(TMP, f"out-{world}-{strategy}")
            r = shard(ck, plan, out, world, strategy, nproc=(world > 1 or strategy == "broadcast"))
            if not check(r.returncode == 0, f"{label}: shard exit {r.returncode}: {r.stderr}"):
                continue
            check(r.stdout == "", f"{label}: shard wrote to stdout: {r.stdout!r}")
            check("matches no parameter" in r.stderr and f"shardkit shard: {len(original)} parameters" in r.stderr,
                  f"{label}: warning/summary missing: {r.stderr}")
            want = {"index.json"} | {f"rank-{k:05d}.safetensors" for k in range(world)}
            check(set(os.listdir(out)) == want, f"{label}: files {sorted(os.listdir(out))}")
            index = check_index(out, original, world, strategy, label)
            check_rank_files(out, index, original, world, label)
            if world == 3 and strategy == "scatter":
                check_world_three(index, label)
            if strategy == "direct":
                same_rank_files(out, os.path.join(TMP, f"out-{world}-scatter"), world, label)
            gathered = os.path.join(TMP, f"gathered-{world}-{strategy}.safetensors")
            r = run(["gather", "--in", out, "--out", gathered])
            check(r.returncode == 0 and r.stdout == "", f"{label}: gather exit {r.returncode}: {r.stderr}")
            with open(ck, "rb") as a, open(gathered, "rb") as b:
                check(a.read() == b.read(), f"{label}: gathered file differs from the original")


def empty_rank_and_replaced_output():
    ck = os.path.join(TMP, "solo.safetensors")
    write_safetensors(ck, {"w": ("F32", [4], bytes(range(16)))})
    plan = os.path.join(TMP, "solo.json")
    with open(plan, "w") as f:
        json.dump({"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}}]}, f)
    out = os.path.join(TMP, "solo-out")
    for strategy in ("scatter", "direct"):  # ranks 1-3 have nothing to receive, or to read
        r = shard(ck, plan, out, 4, strategy)
        check(r.returncode == 0, f"solo 4 ranks {strategy}: exit {r.returncode}: {r.stderr}")
        text, _, tensors = read_safetensors(os.path.join(out, "rank-00003.safetensors"))
        check(text.strip() == "{}" and not tensors, f"empty rank file header {text!r}")
        _, _, tensors = read_safetensors(os.path.join(out, "rank-00000.safetensors"))
        check(tensors == {"w": ("F32", [4], bytes(range(16)))}, f"solo {strategy}: rank 0 {tensors}")
    r = shard(ck, plan, out, 2, "scatter")  # replaces the 4-rank output
    check(r.returncode == 0, f"solo 2 ranks over 4: exit {r.returncode}: {r.stderr}")
    files = sorted(os.listdir(out))
    check(files == ["index.json", "rank-00000.safetensors", "rank-00001.safetensors"],
          f"replaced: {files}")


def file_order_and_no_metadata(original):
    ck = os.path.join(TMP, "reordered.safetensors")
    write_safetensors(ck, original, metadata=None, order=sorted(original, reverse=True))
    out = os.path.join(TMP, "reordered-out")
    r = shard(ck, make_plan(2), out, 2, "scatter")
    check(r.returncode == 0, f"reordered: exit {r.returncode}: {r.stderr}")
    for rank in range(2):  # DCP_SHARDING_INFO alone
        _, metadata, _ = read_safetensors(os.path.join(out, f"rank-{rank:05d}.safetensors"))
        check(set(metadata or {}) == {"DCP_SHARDING_INFO"},
              f"reordered: rank {rank} file has __metadata__ {metadata}")
    gathered = os.path.join(TMP, "reordered-gathered.safetensors")
    r = run(["gather", "--in", out, "--out", gathered])
    check(r.returncode == 0, f"reordered gather: exit {r.returncode}: {r.stderr}")
    text, metadata, tensors = read_safetensors(gathered)
    check(metadata is None, "reordered: __metadata__ appeared")
    check(tensors == original, "reordered: tensors differ")
    keys = list(json.loads(text))
    check(keys == sorted(keys), f"reordered: header keys not sorted: {keys}")


def main():
    original = make_checkpoint()
    ck = os.path.join(TMP, "model.safetensors")
    write_safetensors(ck, original, METADATA)
    round_trips(ck, original)
    check_inspect(ck, os.path.join(TMP, "out-3-scatter"))
    empty_rank_and_replaced_output()
    file_order_and_no_metadata(original)
    finish("checkpoint")


if __name__ == "__main__":
    main()
