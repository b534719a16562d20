#!/usr/bin/env python3
"""`shardkit inspect` checks what it shows: a shard directory's rank files against index.json
(truncated, a shard missing, an unlisted tensor, a file missing: exit 2 naming the file), a file
that is not safetensors says so, and one file of a multi-file checkpoint given alone is a warning
on stderr naming the index beside it (stdout stays the table)."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (check, finish, read_safetensors, run, tmp_path,  # noqa: E402
                                write_safetensors)


PLAN = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0,
                                          "placements": {"ranks": "all"}}}]}


def expect_refused(label, target, *texts):
    r = run(["inspect", target])
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(r.returncode == 2, f"{label}: exit {r.returncode}, expected 2: {r.stderr}")
    check(r.stdout == "", f"{label}: a table on stdout: {r.stdout}")
    for text in texts:
        check(text in first, f"{label}: {text!r} not in the first stderr line: {r.stderr}")


def damaged_copy(name, damage):
    """A copy of the good shard directory with `damage(directory)` applied."""
    out = tmp_path(name)
    shutil.copytree(tmp_path("good"), out)
    damage(out)
    return out


def rewrite_rank_file(directory, rank, edit):
    """Rewrites rank `rank`'s file with edit(tensors) (name -> (dtype, shape, bytes))."""
    file = os.path.join(directory, f"rank-{rank:05d}.safetensors")
    _, metadata, tensors = read_safetensors(file)
    edit(tensors)
    write_safetensors(file, tensors, metadata)


def shard_directories():
    ck = tmp_path("model.safetensors")
    write_safetensors(ck, {"w": ("F32", [6, 4], bytes(96)), "b": ("F32", [4], bytes(16))})
    with open(tmp_path("plan.json"), "w") as f:
        json.dump(PLAN, f)
    r = run(["shard", "--nproc", "3", "--plan", tmp_path("plan.json"), "--checkpoint", ck,
             "--out", tmp_path("good")])
    check(r.returncode == 0, f"shard: {r.stderr}")
    r = run(["inspect", tmp_path("good")])
    check(r.returncode == 0 and r.stdout.startswith("name") and r.stderr == "",
          f"inspect of a good directory: {r.returncode} {r.stdout} {r.stderr}")

    def truncate(d):
        file = os.path.join(d, "rank-00001.safetensors")
        os.truncate(file, os.path.getsize(file) - 4)
    expect_refused("truncated rank file", damaged_copy("truncated", truncate),
                   "rank-00001.safetensors", "file truncated")
    missing = damaged_copy("missing-tensor",
                           lambda d: rewrite_rank_file(d, 2, lambda t: t.pop("b")))
    expect_refused("rank file without a listed shard", missing, "rank-00002.safetensors",
                   'no tensor "b"')
    extra = damaged_copy("extra-tensor", lambda d: rewrite_rank_file(
        d, 0, lambda t: t.update({"stray": ("F32", [1], bytes(4))})))
    expect_refused("rank file with an unlisted tensor", extra, "rank-00000.safetensors",
                   'tensor "stray" is not listed in index.json')
    wrong = damaged_copy("wrong-shape", lambda d: rewrite_rank_file(
        d, 1, lambda t: t.update({"w": ("F32", [3, 4], bytes(48))})))
    expect_refused("shard of another shape", wrong, "rank-00001.safetensors", "[3, 4]")
    gone = damaged_copy("gone", lambda d: os.remove(os.path.join(d, "rank-00002.safetensors")))
    expect_refused("missing rank file", gone, "rank-00002.safetensors", "no such file")


def not_safetensors():
    with open(tmp_path("notes.txt"), "w") as f:
        f.write("These are notes, not tensors: a header length of 7020653469289679483?\n" * 4)
    expect_refused("text file", tmp_path("notes.txt"), "notes.txt: not a safetensors file (")
    check("exceeds the limit" not in run(["inspect", tmp_path("notes.txt")]).stderr,
          "text file: still reported as a header length")


def one_file_of_several():
    hf = tmp_path("hf")
    os.makedirs(hf)
    names = [f"model-0000{k}-of-00002.safetensors" for k in (1, 2)]
    write_safetensors(os.path.join(hf, names[0]), {"a": ("F32", [2], bytes(8))})
    write_safetensors(os.path.join(hf, names[1]), {"b": ("F32", [2], bytes(8))})
    index = os.path.join(hf, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": 16},
                   "weight_map": {"a": names[0], "b": names[1]}}, f)
    r = run(["inspect", os.path.join(hf, names[0])])
    check(r.returncode == 0, f"one file of two: exit {r.returncode}: {r.stderr}")
    check(r.stdout.splitlines() == ["name  dtype  shape  bytes", "a     F32    [2]    8"],
          f"one file of two: stdout is not the table alone: {r.stdout!r}")
    check(r.stderr.startswith("warning: ") and index in r.stderr and names[0] in r.stderr and
          "one of the 2 files" in r.stderr, f"one file of two: no warning naming the index: "
          f"{r.stderr!r}")
    for whole in (index, hf):
        r = run(["inspect", whole])
        check(r.returncode == 0 and r.stderr == "", f"inspect {whole}: {r.returncode} {r.stderr}")


def main():
    shard_directories()
    not_safetensors()
    one_file_of_several()
    finish("inspect")


if __name__ == "__main__":
    main()
