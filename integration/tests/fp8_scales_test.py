#!/usr/bin/env python3
"""Block-quantized FP8 checkpoints through the real `shardkit shard` on 3 ranks: a synthetic
DeepSeek-style checkpoint (F8_E4M3 weights, F32 `_scale_inv` scales, one per 128x128 block).
A plan with "align": 128 on the weights and the same placements on the scales is accepted, the
shards hold whole blocks with their scales, and `gather` gives every byte back; a weight cut off
its blocks, or scales cut elsewhere or placed on other ranks, is exit 2 with the same first line
on every rank naming both tensors and the boundary, before any rank file is written;
--allow-misaligned-scales makes that a warning; scales of another shape are skipped with a
warning; replicated scales are accepted; ranks given different FP8 options are exit 2."""

import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, check, extract, finish, first_lines_per_rank,  # noqa: E402
                                read_safetensors, run, tmp_path, write_safetensors)

WORLD = 3
W, WS = "layers.0.mlp.weight", "layers.0.mlp.weight_scale_inv"  # rows: [300, 256], [3, 2]
O, OS = "layers.0.attn.o.weight", "layers.0.attn.o.weight_scale_inv"  # columns: [256, 300], [2, 3]


def scales(rng, shape):
    count = shape[0] * shape[1]
    return ("F32", shape, struct.pack(f"<{count}f", *(rng.uniform(1e-4, 1e-2) for _ in range(count))))


def checkpoint(name, rng, scale_shape=(3, 2)):
    tensors = {W: ("F8_E4M3", [300, 256], rng.randbytes(300 * 256)),
               WS: scales(rng, list(scale_shape)),
               O: ("F8_E4M3", [256, 300], rng.randbytes(256 * 300)),
               OS: scales(rng, [2, 3]),
               "norm.weight": ("F32", [4], rng.randbytes(16))}
    write_safetensors(tmp_path(name), tensors, metadata={"quantization": "fp8 128x128"})
    return tmp_path(name), tensors


def chunk(dim, ranks="all", align=None):
    spec = {"type": "chunk", "dim": dim, "placements": {"ranks": ranks}}
    if align is not None:
        spec["align"] = align
    return spec


def plan(name, rules):
    with open(tmp_path(name), "w") as f:
        json.dump({"rules": [{"match": match, "spec": spec} for match, spec in rules]}, f)
    return tmp_path(name)


# The worked plan of docs/checkpoints.md: rows of W and columns of O on 128 blocks, their scales alike.
ALIGNED = [(W, chunk(0, align=128)), (WS, chunk(0)), (O, chunk(1, align=128)), (OS, chunk(1))]


def shard(label, plan_path, ck, *flags):
    out = tmp_path(label.replace(" ", "-") + "-out")
    r = run(["shard", "--nproc", str(WORLD), "--plan", plan_path, "--checkpoint", ck,
             "--out", out] + list(flags))
    return out, r


def round_trip(label, out, tensors):
    back = tmp_path(label.replace(" ", "-") + "-back.safetensors")
    g = run(["gather", "--in", out, "--out", back])
    if check(g.returncode == 0, f"{label}: gather exit {g.returncode}: {g.stderr}"):
        _, metadata, got = read_safetensors(back)
        check(got == tensors, f"{label}: gathered tensors differ")
        check(metadata == {"quantization": "fp8 128x128"}, f"{label}: metadata {metadata}")


def expect_refused(label, r, out, *texts):
    """Exit 2, the same first line on every rank holding every text, no rank file written."""
    firsts = first_lines_per_rank(r.stderr, WORLD)
    check(r.returncode == 2, f"{label}: exit {r.returncode}: {r.stderr}")
    check(len(firsts) == WORLD and len(set(firsts.values())) == 1,
          f"{label}: first lines differ: {firsts}")
    for text in texts:
        check(text in firsts.get(0, ""), f"{label}: {text!r} not in {firsts.get(0)!r}")
    left = os.listdir(out) if os.path.isdir(out) else []
    check(not any(name.startswith("rank-") or name == "index.json" for name in left),
          f"{label}: files written: {left}")
    return firsts.get(0, "")


def aligned(rng):
    ck, tensors = checkpoint("aligned.safetensors", rng)
    out, r = shard("aligned", plan("aligned.json", ALIGNED), ck)
    if not check(r.returncode == 0, f"aligned: exit {r.returncode}: {r.stderr}"):
        return
    check("FP8 block scales" not in r.stderr, f"aligned: unexpected warning: {r.stderr}")
    # Rank k holds weight rows [128k, 128(k+1)) (the last 44) with scale row k, and the same for
    # the columns of O.
    for rank, (begin, size) in enumerate(((0, 128), (128, 128), (256, 44))):
        _, _, got = read_safetensors(os.path.join(out, f"rank-{rank:05d}.safetensors"))
        want = {W: ("F8_E4M3", [size, 256], extract(tensors[W][2], [300, 256], 1, [begin, 0], [size, 256])),
                WS: ("F32", [1, 2], extract(tensors[WS][2], [3, 2], 4, [rank, 0], [1, 2])),
                O: ("F8_E4M3", [256, size], extract(tensors[O][2], [256, 300], 1, [0, begin], [256, size])),
                OS: ("F32", [2, 1], extract(tensors[OS][2], [2, 3], 4, [0, rank], [2, 1])),
                "norm.weight": tensors["norm.weight"]}
        check(got == want, f"aligned: rank {rank}'s shards: {[(n, v[1]) for n, v in got.items()]}")
    with open(os.path.join(out, "index.json")) as f:
        spec = json.load(f)["parameters"][W]["spec"]
    check(spec == {"align": 128, "dim": 0, "placements": ["rank:0", "rank:1", "rank:2"],
                   "type": "chunk", "version": 1}, f"aligned: index.json spec {spec}")
    i = run(["inspect", out])
    check(i.returncode == 0 and "chunk(dim=0,align=128)" in i.stdout and
          "chunk(dim=1,align=128)" in i.stdout, f"aligned: inspect: {i.stdout}")
    round_trip("aligned", out, tensors)
    # Four ranks' worth of placements on three: the weight's and the scale's last chunks are both
    # zero-size (rank 0 holds two of each).
    out, r = shard("zero-size tail", plan("tail.json", [(W, chunk(0, [0, 1, 2, 0], 128)),
                                                        (WS, chunk(0, [0, 1, 2, 0]))]), ck)
    if check(r.returncode == 0, f"zero-size tail: exit {r.returncode}: {r.stderr}"):
        _, _, got = read_safetensors(os.path.join(out, "rank-00000.safetensors"))
        check(got[W + "#3"][1] == [0, 256] and got[WS + "#3"][1] == [0, 2],
              f"zero-size tail: rank 0 holds {[(n, v[1]) for n, v in got.items()]}")
        round_trip("zero-size tail", out, tensors)


def refused(rng):
    ck, _ = checkpoint("refused.safetensors", rng)
    out, r = shard("misaligned", plan("misaligned.json", [(W, chunk(0)), (WS, chunk(0))]), ck)
    expect_refused("misaligned", r, out,
                   "shardkit shard: FP8 block scales: layers.0.mlp.weight (F8_E4M3 [300, 256]) is "
                   "cut at 100 on dim 0, where its shard 0 (offsets [0, 0], sizes [100, 256], "
                   "rank:0) ends: not a multiple of 128, but its scales "
                   "layers.0.mlp.weight_scale_inv (F32 [3, 2]) hold one scale per 128×128 block "
                   "(give the weight's chunk spec \"align\": 128)")
    # The scales on other ranks: same blocks, placements reversed.
    out, r = shard("scale placements", plan("placements.json", [(W, chunk(0, align=128)),
                                                                (WS, chunk(0, [2, 1, 0]))]), ck)
    expect_refused("scale placements", r, out, W, WS,
                   "the scale's shard 0 (offsets [0, 0], sizes [1, 2], rank:2) is on rank 2, the "
                   "weight's shard 0 (offsets [0, 0], sizes [128, 256], rank:0) on rank 0")
    # The column weight's scales cut on rows: the scale is cut where the weight is not.
    out, r = shard("scale cut", plan("cut.json", [(O, chunk(1, align=128)), (OS, chunk(0))]), ck)
    expect_refused("scale cut", r, out,
                   "FP8 block scales: layers.0.attn.o.weight_scale_inv (F32 [2, 3]) is not cut like "
                   "layers.0.attn.o.weight (F8_E4M3 [256, 300]), one scale per 128×128 block: the "
                   "scale's shard 0 (offsets [0, 0], sizes [1, 3], rank:0) ends at block 1 on dim 0 "
                   "(index 128 of the weight), inside the weight's shard 0 (offsets [0, 0], sizes "
                   "[256, 128], rank:0)")
    # Replicated scales (no rule): accepted, but the weight's cuts must still be on blocks.
    out, r = shard("replicated scale", plan("replicated.json", [(W, chunk(0, align=128))]), ck)
    check(r.returncode == 0, f"replicated scale: exit {r.returncode}: {r.stderr}")
    out, r = shard("replicated scale misaligned", plan("replicated-bad.json", [(W, chunk(0))]), ck)
    expect_refused("replicated scale misaligned", r, out, "is cut at 100 on dim 0")


def overrides(rng):
    ck, tensors = checkpoint("override.safetensors", rng)
    misaligned = plan("override.json", [(W, chunk(0)), (WS, chunk(0))])
    out, r = shard("allowed", misaligned, ck, "--allow-misaligned-scales")
    if check(r.returncode == 0, f"allowed: exit {r.returncode}: {r.stderr}"):
        check("[rank 0] warning: FP8 block scales: layers.0.mlp.weight (F8_E4M3 [300, 256]) is cut "
              "at 100 on dim 0" in r.stderr and "; sharded anyway (--allow-misaligned-scales)" in
              r.stderr, f"allowed: no warning: {r.stderr}")
        check("[rank 1] warning" not in r.stderr, f"allowed: warned on rank 1: {r.stderr}")
        round_trip("allowed", out, tensors)
    # Block-64 scales ([5, 4]) checked with the default 128: not checked, a warning.
    ck64, tensors64 = checkpoint("block64.safetensors", rng, scale_shape=(5, 4))
    out, r = shard("other shape", misaligned, ck64)
    if check(r.returncode == 0, f"other shape: exit {r.returncode}: {r.stderr}"):
        check("warning: FP8 block scales: layers.0.mlp.weight_scale_inv (F32 [5, 4]) does not have "
              "the shape [3, 2] of one scale per 128×128 block of layers.0.mlp.weight (F8_E4M3 "
              "[300, 256]) (--fp8-block 128): not checked" in r.stderr, f"other shape: {r.stderr}")
        round_trip("other shape", out, tensors64)
    # With --fp8-block 64 they fit: the cut at 100 is refused, "align": 64 accepted.
    out, r = shard("block 64", misaligned, ck64, "--fp8-block", "64")
    expect_refused("block 64", r, out, "is cut at 100 on dim 0", "not a multiple of 64",
                   "one scale per 64×64 block")
    out, r = shard("block 64 aligned", plan("align64.json", [(W, chunk(0, align=64)), (WS, chunk(0))]),
                   ck64, "--fp8-block=64")
    check(r.returncode == 0 and "FP8" not in r.stderr, f"block 64 aligned: {r.returncode}: {r.stderr}")
    out, r = shard("block 0", misaligned, ck64, "--fp8-block", "0")
    check(r.returncode == 2 and (r.stderr.splitlines() or [""])[0] ==
          "shardkit shard: --fp8-block: 0 is out of range [1, 1073741824]",
          f"block 0: {r.returncode}: {r.stderr}")


def resharded(rng):
    """reshard checks the new layout the same way: the aligned rows of W moved to 2 ranks are
    accepted and gather back; the misaligned plan is refused on every rank; the override warns."""
    ck, tensors = checkpoint("reshard.safetensors", rng)
    src, r = shard("reshard src", plan("reshard-src.json", ALIGNED), ck)
    if not check(r.returncode == 0, f"reshard src: {r.stderr}"):
        return
    def reshard(label, plan_path, *flags):
        out = tmp_path(label.replace(" ", "-") + "-out")
        return out, run(["reshard", "--nproc", str(WORLD), "--in", src, "--plan", plan_path,
                         "--out", out] + list(flags))
    out, r = reshard("reshard aligned", plan("reshard-aligned.json",
                                             [(W, chunk(0, [1, 0], 128)), (WS, chunk(0, [1, 0]))]))
    if check(r.returncode == 0, f"reshard aligned: exit {r.returncode}: {r.stderr}"):
        round_trip("reshard aligned", out, tensors)
    misaligned = plan("reshard-misaligned.json", [(W, chunk(0)), (WS, chunk(0))])
    out, r = reshard("reshard misaligned", misaligned)
    expect_refused("reshard misaligned", r, out, "shardkit reshard: FP8 block scales: "
                   "layers.0.mlp.weight (F8_E4M3 [300, 256]) is cut at 100 on dim 0")
    out, r = reshard("reshard override", misaligned, "--allow-misaligned-scales")
    check(r.returncode == 0 and "--allow-misaligned-scales" in r.stderr,
          f"reshard override: exit {r.returncode}: {r.stderr}")


def disagreeing(rng):
    """Each rank checks alone, so the ranks must be given the same FP8 options (exit 2 if not)."""
    ck, _ = checkpoint("disagree.safetensors", rng)
    aligned_plan = plan("disagree.json", ALIGNED)
    for label, flags, text in (
            ("different blocks", "--fp8-block 64",
             "the ranks were given different FP8 block sizes (--fp8-block): rank 1: 64; "
             "ranks 0, 2: 128"),
            ("different allow", "--allow-misaligned-scales",
             "the ranks were given different --allow-misaligned-scales: ranks 0, 2: not set; "
             "rank 1: set")):
        out = tmp_path(label.replace(" ", "-") + "-out")
        script = (f'f=""; if [ "$SHARDKIT_RANK" = 1 ]; then f="{flags}"; fi; '
                  f'exec "{BIN}" shard --plan "{aligned_plan}" --checkpoint "{ck}" --out "{out}" $f')
        r = run(["launch", "--nproc", str(WORLD), "--timeout", "20", "--", "sh", "-c", script])
        expect_refused(label, r, out, text)


def main():
    rng = random.Random(17)
    aligned(rng)
    refused(rng)
    overrides(rng)
    resharded(rng)
    disagreeing(rng)
    finish("fp8 scales")


if __name__ == "__main__":
    main()
