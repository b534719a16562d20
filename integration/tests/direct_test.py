#!/usr/bin/env python3
"""`shardkit shard --strategy direct`: every rank reads its own shards from the checkpoint.

- Multi-file Hugging Face checkpoints (the index, and the directory holding it; BF16, F8, U16 and
  F16 cut on dim 0 or 1, F4 and F6 rows of whole bytes, replicated F32 and F6) on 1-4 ranks: rank files byte-identical to `scatter`'s, the
  gather gives back every tensor, index.json says "direct".
- "Hosts": each rank opens its own copy (host<R>/ckpt, as on machines that each mount the same
  path): identical copies work; a rank whose copy is missing, or whose copy has another header or
  another index, makes every rank exit 2 with the same first line naming that rank and the file,
  and leaves an earlier complete output untouched.
- A 64 MiB checkpoint read in 8 MiB rounds, changed under a stopped rank 1 (SIGSTOP, then
  SIGCONT): replaced by another file of the same size and header (renamed over it) once rank 1 has
  created its shard file — after the ranks agreed on the checkpoint, before or at its first reads —
  and truncated once rank 1 has read 4 MiB: every rank exits 2 naming the file, no index.json.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, ITEM_SIZE, TMP, check, expect_every_rank, finish,  # noqa: E402
                                io_counter, io_grew, launch_recording_pids, numel, read_pid,
                                read_safetensors, run, same_rank_files, write_safetensors,
                                writing_file)

MIB = 1 << 20
PLAN = os.path.join(TMP, "direct-plan.json")
INDEX = "model.safetensors.index.json"


def write_hf(directory, rng):
    """A 3-file Hugging Face checkpoint in `directory`; returns {tensor: (dtype, shape, bytes)}."""
    files = {
        "model-00001-of-00003.safetensors": {"embed.rows": ("BF16", [7, 6]),
                                             "fp8.cols": ("F8_E4M3", [5, 8])},
        "model-00002-of-00003.safetensors": {"u16.cols": ("U16", [4, 2]), "norm": ("F32", [6]),
                                             "f4.rows": ("F4", [8, 2])},
        "model-00003-of-00003.safetensors": {"head.rows": ("F16", [2, 3]),
                                             "f6.rows": ("F6_E2M3", [4, 4]),
                                             "f6b": ("F6_E3M2", [8])},
    }
    os.makedirs(directory, exist_ok=True)
    originals, weights = {}, {}
    for name, specs in files.items():
        tensors = {}
        for tensor, (dtype, shape) in specs.items():
            bits = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}.get(dtype, 8 * ITEM_SIZE.get(dtype, 0))
            size = numel(shape) * bits // 8
            tensors[tensor] = (dtype, shape, rng.randbytes(size))
            weights[tensor] = name
        write_safetensors(os.path.join(directory, name), tensors, metadata={"format": "pt"})
        originals.update(tensors)
    with open(os.path.join(directory, INDEX), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(b) for _, _, b in originals.values())},
                   "weight_map": weights}, f)
    return originals


def shard(checkpoint, out, world, strategy, extra=()):
    return run(["shard", "--nproc", str(world), "--plan", PLAN, "--checkpoint", checkpoint,
                "--out", out, "--strategy", strategy, *extra])


def round_trips(directory, originals):
    for world in (1, 2, 3, 4):
        for form, checkpoint in (("index", os.path.join(directory, INDEX)), ("dir", directory)):
            label = f"{form} world {world}"
            outs = {s: os.path.join(TMP, f"{form}-{world}-{s}") for s in ("scatter", "direct")}
            results = {s: shard(checkpoint, outs[s], world, s) for s in outs}
            if not all(check(r.returncode == 0, f"{label} {s}: exit {r.returncode}: {r.stderr}")
                       for s, r in results.items()):
                continue
            check("direct: every rank read its own shards" in results["direct"].stderr,
                  f"{label}: summary: {results['direct'].stderr}")
            with open(os.path.join(outs["direct"], "index.json")) as f:
                check(json.load(f)["strategy"] == "direct", f"{label}: index.json strategy")
            same_rank_files(outs["direct"], outs["scatter"], world, label)
            back = os.path.join(TMP, f"{form}-{world}-back.safetensors")
            g = run(["gather", "--in", outs["direct"], "--out", back])
            if check(g.returncode == 0, f"{label}: gather: {g.stderr}"):
                check(read_safetensors(back)[2] == originals, f"{label}: gathered tensors differ")


def on_hosts(hosts, out, world=3, extra=""):
    """`shard --strategy direct` where rank R opens hosts/host<R>/ckpt (the same path on every
    host of a cluster, a different copy per rank here)."""
    script = (f'exec "{BIN}" shard --plan "{PLAN}" --checkpoint "{hosts}/host$SHARDKIT_RANK/ckpt" '
              f'--out "{out}" --strategy direct {extra}')
    return subprocess.run([BIN, "launch", "--nproc", str(world), "--timeout", "20", "--", "sh",
                           "-c", script], capture_output=True, text=True, timeout=60)


def hosts_cases(directory):
    hosts = os.path.join(TMP, "hosts")
    for rank in range(3):
        shutil.copytree(directory, os.path.join(hosts, f"host{rank}", "ckpt"))
    out = os.path.join(TMP, "hosts-out")
    r = on_hosts(hosts, out)
    if not check(r.returncode == 0, f"hosts, same copies: exit {r.returncode}: {r.stderr}"):
        return
    same_rank_files(out, os.path.join(TMP, "dir-3-scatter"), 3, "hosts")
    with open(os.path.join(out, "index.json"), "rb") as f:
        earlier = f.read()

    # Rank 2's copy is missing.
    shutil.move(os.path.join(hosts, "host2"), os.path.join(hosts, "gone"))
    r = on_hosts(hosts, out)
    expect_every_rank("missing on rank 2", r, 3, "rank 2 cannot open the checkpoint",
                      f"{hosts}/host2/ckpt")
    shutil.move(os.path.join(hosts, "gone"), os.path.join(hosts, "host2"))

    # Rank 1's second file says F16 where the others' say BF16 (same size: only the header differs).
    second = os.path.join(hosts, "host1", "ckpt", "model-00002-of-00003.safetensors")
    with open(second, "rb") as f:
        original = f.read()
    changed = original.replace(b'"dtype":"F32"', b'"dtype":"I32"', 1)
    check(changed != original and len(changed) == len(original), "header edit did not apply")
    with open(second, "wb") as f:
        f.write(changed)
    r = on_hosts(hosts, out)
    expect_every_rank("another header on rank 1", r, 3, "rank 1 (", "sees another checkpoint than "
                      "rank 0, the source", "model-00002-of-00003.safetensors: ", "header sha256:")
    with open(second, "wb") as f:
        f.write(original)

    # Rank 1's index differs (whitespace only: the files would be read the same, but the ranks
    # cannot know that; an index is compared whole).
    index = os.path.join(hosts, "host1", "ckpt", INDEX)
    with open(index, "a") as f:
        f.write("\n")
    r = on_hosts(hosts, out)
    expect_every_rank("another index on rank 1", r, 3, f"{INDEX}: ")
    with open(os.path.join(out, "index.json"), "rb") as f:
        check(f.read() == earlier, "a refused run changed the earlier output's index.json")


def changed_while_reading(label, reached, change):
    """Rank 1 stopped once `reached(pid, out)`, `change(path)` applied, rank 1 continued: exit 2
    everywhere."""
    ck = os.path.join(TMP, "big", "model.safetensors")
    os.makedirs(os.path.dirname(ck), exist_ok=True)
    blob = bytes(range(256)) * (64 * MIB // 256)
    for attempt in range(1, 4):
        write_safetensors(ck, {"w": ("F32", [4096, 4096], blob), "b": ("F32", [4], b"\1" * 16)})
        out = os.path.join(TMP, f"{label}-{attempt}")
        pids = os.path.join(TMP, f"{label}-{attempt}.pids")
        launcher = launch_recording_pids(pids, f'shard --plan "{PLAN}" --checkpoint "{ck}" '
                                         f'--out "{out}" --strategy direct --memory-mib 8')
        start = time.time()
        pid = read_pid(os.path.join(pids, "1"), start + 20)
        base, read_before_stop = None, None  # rank 1's rchar: first seen, and when stopped
        while time.time() - start < 20 and launcher.poll() is None:
            base = io_counter(pid, "rchar") if base is None else base
            if reached(pid, out):
                os.kill(pid, signal.SIGSTOP)
                read_before_stop = (io_counter(pid, "rchar") or 0) - (base or 0)
                change(ck)
                os.kill(pid, signal.SIGCONT)
                break
            time.sleep(0.0005)
        _, stderr = launcher.communicate(timeout=60)
        stopped = read_before_stop is not None
        # Rank 1 reads 1365 rows of 16 KiB (21.3 MiB): stopped before 16 MiB, it had rounds left.
        if launcher.returncode == 0 and stopped and read_before_stop < 16 * MIB:
            check(False, f"{label}: exit 0, though the file changed with rank 1 "
                  f"{read_before_stop} bytes into its reads")
            return
        if launcher.returncode == 0:
            print(f"{label}: rank 1 had finished reading before it was stopped (a slow machine); "
                  "again", flush=True)
            continue
        check(stopped, f"{label}: rank 1 was never stopped: {stderr}")
        expect_every_rank(label, subprocess.CompletedProcess([], launcher.returncode, "", stderr),
                          3, ck)
        check(not os.path.exists(os.path.join(out, "index.json")), f"{label}: index.json written")
        return
    check(False, f"{label}: rank 1 was never stopped in time in 3 tries")


def replace_with_same_size(path):
    other = path + ".new"
    shutil.copyfile(path, other)
    with open(other, "r+b") as f:
        f.seek(-16, os.SEEK_END)
        f.write(b"\2" * 16)
    os.replace(other, path)


def truncate(path):
    os.truncate(path, os.path.getsize(path) - 4096)


def main():
    with open(PLAN, "w") as f:
        json.dump({"rules": [
            {"match": "*.rows", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
            {"match": "*.cols", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
            {"match": "w", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
        ]}, f)
    directory = os.path.join(TMP, "hf")
    originals = write_hf(directory, random.Random(16))
    round_trips(directory, originals)
    hosts_cases(directory)
    changed_while_reading("replaced", writing_file, replace_with_same_size)
    changed_while_reading("truncated", io_grew("rchar", 4 * MIB), truncate)
    finish("direct")


if __name__ == "__main__":
    main()
