#!/usr/bin/env python3
"""`shardkit gather --max-shard-size SIZE`: a shard directory (3 ranks) back as a Hugging Face
checkpoint. Checks the file names and index (total_size, weight_map, written as Hugging Face
writes it), the fill rule at its limits (a tensor larger than SIZE alone while the open file stays
open, a tensor of exactly SIZE, files exactly full, zero-size tensors), __metadata__ and sorted
keys in every file; everything in one file is model.safetensors alone, byte-identical to the
single-file gather; a non-empty or unusable OUT_DIR and bad SIZE strings are exit 2 naming them;
the round trip shard -> gather --max-shard-size -> shard --checkpoint OUT_DIR -> gather gives the
original bytes; 48 MiB under --memory-mib 4 stays far below 48 MiB of peak RSS; a run killed
after its first file leaves no index, and shard, inspect and a new gather refuse that directory.
Then, under SHARDKIT_TEST_PYTHON (skipped without), the file assignment against huggingface_hub's
split_state_dict_into_shards_factory for several size lists, and every file read back with PyPI
safetensors' safe_open."""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checkpoint_testlib import (BIN, ITEM_SIZE, TMP, check, finish, numel, read_safetensors,
                                rerun_with_clients, run, write_safetensors)

WORLD = 3
METADATA = {"format": "pt", "origin": "gather_hf_test"}
INDEX = "model.safetensors.index.json"
LOCK = ".shardkit.lock"
PLAN = os.path.join(TMP, "hf-out-plan.json")
# With --max-shard-size 1KB (1000 bytes), in name order: a opens file 1; b (1200 > 1000) gets
# file 2 of its own while file 1 stays open; c fills file 1 exactly (400 + 600); d (0 bytes)
# still fits; e (exactly 1000) cannot join the full file 1 and fills file 3; f and g share file 4.
SPECS = {"a.rows": ("F32", [10, 10]), "b.big.cols": ("F32", [30, 10]),
         "c.rows": ("F32", [15, 10]), "d.empty.rows": ("F32", [0, 4]),
         "e.limit.cols": ("U8", [10, 100]), "f.rows": ("I64", [1]), "g": ("F16", [8])}
FILE_OF = {"a.rows": 1, "b.big.cols": 2, "c.rows": 1, "d.empty.rows": 1, "e.limit.cols": 3,
           "f.rows": 4, "g": 4}
TOTAL = 3224


def write_plan():
    every = {"ranks": "all"}
    with open(PLAN, "w") as f:
        json.dump({"rules": [
            {"match": "*.rows", "spec": {"type": "chunk", "dim": 0, "placements": every}},
            {"match": "**.cols", "spec": {"type": "chunk", "dim": 1, "placements": every}},
            {"match": "t*", "spec": {"type": "chunk", "dim": 0, "placements": every}}]}, f)


def shard(checkpoint, out, nproc=WORLD):
    return run(["shard", "--nproc", str(nproc), "--plan", PLAN, "--checkpoint", checkpoint,
                "--out", out])


def hf_gather(shards, out, size, *extra):
    return run(["gather", "--in", shards, "--out", out, "--max-shard-size", size, *extra])


def first_line(r):
    return r.stderr.splitlines()[0] if r.stderr else ""


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def names_of(files):
    return [f"model-{k:05d}-of-{files:05d}.safetensors" for k in range(1, files + 1)]


def prepare(rng):
    """The checkpoint, its shard directory and its single-file gather: (originals, shards,
    single)."""
    originals = {name: (dtype, shape, rng.randbytes(numel(shape) * ITEM_SIZE[dtype]))
                 for name, (dtype, shape) in SPECS.items()}
    ck = os.path.join(TMP, "hf-out-ck.safetensors")
    write_safetensors(ck, originals, metadata=METADATA)
    shards = os.path.join(TMP, "hf-out-shards")
    single = os.path.join(TMP, "hf-out-single.safetensors")
    r = shard(ck, shards)
    check(r.returncode == 0, f"shard: {r.stderr}")
    r = run(["gather", "--in", shards, "--out", single])
    check(r.returncode == 0, f"gather: {r.stderr}")
    return originals, shards, single


def check_file(path, expected, label):
    """A file of the output: __metadata__ restored, header keys sorted, exactly `expected`."""
    raw, metadata, tensors = read_safetensors(path)
    check(metadata == METADATA, f"{label}: __metadata__ {metadata}")
    keys = list(json.loads(raw))
    check(keys == sorted(keys), f"{label}: header keys not sorted: {keys}")
    check(tensors == expected, f"{label}: tensors {sorted(tensors)}, expected {sorted(expected)}")
    return tensors


def layout_and_index(shards, originals):
    out = os.path.join(TMP, "hf-1KB")
    r = hf_gather(shards, out, "1KB")
    if not check(r.returncode == 0, f"1KB: exit {r.returncode}: {r.stderr}"):
        return out
    names = names_of(4)
    listing = sorted(os.listdir(out))
    # The model files and the index, nothing else: the lock file went with the run's lock.
    if not check(listing == sorted(names + [INDEX]), f"1KB: {listing}"):
        return out
    with open(os.path.join(out, INDEX)) as f:
        text = f.read()
    index = json.loads(text)
    check(text == json.dumps(index, indent=2, sort_keys=True) + "\n", f"1KB: index text {text!r}")
    check(index == {"metadata": {"total_size": TOTAL},
                    "weight_map": {t: names[k - 1] for t, k in FILE_OF.items()}},
          f"1KB: index {index}")
    for k, name in enumerate(names, 1):
        tensors = check_file(os.path.join(out, name),
                             {t: originals[t] for t, f in FILE_OF.items() if f == k}, name)
        data = sum(len(blob) for _, _, blob in tensors.values())
        check(data <= 1000 or len(tensors) == 1, f"{name}: {data} bytes in {len(tensors)} tensors")
    check(first_line(r).startswith("shardkit gather: 7 parameters (") and
          f" from 3 rank files to {out} (4 files and {INDEX}) in " in first_line(r),
          f"1KB: summary {r.stderr}")
    return out


def one_file(shards, single, originals):
    """SIZE that everything fits (exactly, for 3224): model.safetensors alone, no index; 3223:
    the last tensor (g, 16 bytes) goes to a second file."""
    for size in ("1MB", "1mib", str(TOTAL)):
        out = os.path.join(TMP, f"hf-one-{size}")
        if size == "1mib":  # an older shardkit's lock file, left behind: taken over and removed
            os.makedirs(out)
            open(os.path.join(out, LOCK), "w").close()
        r = hf_gather(shards, out, size)
        if not check(r.returncode == 0, f"{size}: exit {r.returncode}: {r.stderr}"):
            continue
        check(sorted(os.listdir(out)) == ["model.safetensors"], f"{size}: {os.listdir(out)}")
        check(same_bytes(os.path.join(out, "model.safetensors"), single),
              f"{size}: model.safetensors differs from the single-file gather")
    out = os.path.join(TMP, "hf-3223")
    r = hf_gather(shards, out, str(TOTAL - 1))
    if check(r.returncode == 0, f"3223: {r.stderr}"):
        with open(os.path.join(out, INDEX)) as f:
            weight_map = json.load(f)["weight_map"]
        first, second = names_of(2)
        check(weight_map == {t: second if t == "g" else first for t in SPECS},
              f"3223: {weight_map}")
        check_file(os.path.join(out, second), {"g": originals["g"]}, "3223 file 2")


def refused_out_dirs(shards, done):
    """OUT_DIR holding anything (a finished output included), a regular file, a path below one:
    exit 2 naming it, nothing written there; an existing empty directory is fine."""
    full = os.path.join(TMP, "hf-full")
    os.makedirs(full)
    with open(os.path.join(full, "notes.txt"), "w") as f:
        f.write("mine")
    r = hf_gather(shards, full, "1KB")
    check(r.returncode == 2 and first_line(r).startswith(
        f"shardkit gather: {full}: is not empty (holds notes.txt): "), f"full: {r.stderr}")
    check(os.listdir(full) == ["notes.txt"], f"full: {os.listdir(full)}")
    before = {n: open(os.path.join(done, n), "rb").read() for n in os.listdir(done)}
    r = hf_gather(shards, done, "1KB")
    check(r.returncode == 2 and f"{done}: is not empty (holds model-00001-of-00004.safetensors, "
          "model-00002-of-00004.safetensors, model-00003-of-00004.safetensors and 2 more)"
          in first_line(r), f"done: {r.stderr}")
    check({n: open(os.path.join(done, n), "rb").read() for n in os.listdir(done)} == before,
          "done: the earlier output changed")
    regular = os.path.join(TMP, "hf-regular")
    with open(regular, "w") as f:
        f.write("x")
    for path, text in ((regular, "exists and is not a directory"),
                       (os.path.join(regular, "out"), "Not a directory")):
        r = hf_gather(shards, path, "1KB")
        check(r.returncode == 2 and path in first_line(r) and text in first_line(r),
              f"{path}: {r.stderr}")
    empty = os.path.join(TMP, "hf-empty")
    os.makedirs(empty)
    r = hf_gather(shards, empty, "1KB")
    check(r.returncode == 0 and INDEX in os.listdir(empty), f"empty: {r.stderr}")


def bad_sizes(shards):
    out = os.path.join(TMP, "hf-bad")
    for size, why in (("0", "zero is not a size"), ("0KB", "zero is not a size"),
                      ("-1", "no sign is accepted"), ("-5MB", "no sign is accepted"),
                      ("1.5GB", "fractions are not accepted"), ("0.5", "fractions"),
                      ("junk", "no digits"), ("", "no digits"), ("5TB", "unknown unit"),
                      ("5B", "unknown unit"), ("10 MB", "no spaces are accepted"),
                      ("9223372036854775808", "more than 2^63 - 1 bytes")):
        r = hf_gather(shards, out, size)
        check(r.returncode == 2 and first_line(r).startswith(
            f'shardkit gather: --max-shard-size: got "{size}": {why}'), f"{size!r}: {r.stderr}")
        check(not os.path.exists(out), f"{size!r}: {out} was created")
    r = run(["gather", "--in", shards, "--out", out, "--max-shard-size"])
    check(r.returncode == 2 and "--max-shard-size needs a value" in first_line(r), r.stderr)


def round_trip(hf_dirs, originals, single):
    """shard --checkpoint OUT_DIR (on 2 ranks) then gather: the original bytes, file for file."""
    for hf in hf_dirs:
        label = os.path.basename(hf)
        again = os.path.join(TMP, f"{label}-again")
        r = shard(hf, again, nproc=2)
        if not check(r.returncode == 0, f"{label}: shard --checkpoint: {r.stderr}"):
            continue
        check("total_size" not in r.stderr, f"{label}: shard warned: {r.stderr}")
        back = os.path.join(TMP, f"{label}-back.safetensors")
        r = run(["gather", "--in", again, "--out", back])
        if check(r.returncode == 0, f"{label}: gather: {r.stderr}"):
            _, metadata, tensors = read_safetensors(back)
            check(tensors == originals and metadata == METADATA, f"{label}: tensors differ")
            check(same_bytes(back, single), f"{label}: not byte-identical to the first gather")


def lone_numbered_file(hf):
    """A directory holding one file of a multi-file checkpoint and no index (what an interrupted
    write can leave) is no checkpoint; the file named itself is."""
    lone = os.path.join(TMP, "hf-lone")
    os.makedirs(lone)
    shutil.copy(os.path.join(hf, "model-00001-of-00004.safetensors"), lone)
    text = (f"{lone}: holds only model-00001-of-00004.safetensors, one file of a 4-file "
            "checkpoint, and no *.safetensors.index.json")
    r = run(["inspect", lone])
    check(r.returncode == 2, f"lone inspect: {r.stderr}")
    r = shard(lone, os.path.join(TMP, "hf-lone-out"), nproc=1)
    check(r.returncode == 2 and text in first_line(r), f"lone shard: {r.stderr}")
    r = run(["inspect", os.path.join(lone, "model-00001-of-00004.safetensors")])
    check(r.returncode == 0, f"lone file inspect: {r.stderr}")


def large_shards(rng):
    """48 MiB in 24 tensors of 2 MiB, sharded on 2 ranks: (tensors, shard directory)."""
    ck = os.path.join(TMP, "hf-large-ck.safetensors")
    tensors = {f"w{i:02d}.rows": ("U8", [512, 4096], rng.randbytes(2 << 20)) for i in range(24)}
    write_safetensors(ck, tensors, metadata=METADATA)
    shards = os.path.join(TMP, "hf-large-shards")
    check(shard(ck, shards, nproc=2).returncode == 0, "large: shard failed")
    return tensors, shards


def under_budget(tensors, shards):
    """--memory-mib 4 over 48 MiB into 12 files (two 2 MiB tensors per 5 MB): the peak RSS that
    gather reports (its VmHWM) stays far below the data (not checked under sanitizers), and every
    tensor comes back."""
    out = os.path.join(TMP, "hf-budget")
    r = hf_gather(shards, out, "5MB", "--memory-mib", "4")
    peak = re.search(r", peak RSS ([0-9.]+) MiB$", first_line(r))
    if not check(r.returncode == 0 and peak, f"budget: {r.stderr}"):
        return
    print(f"budget: 48 MiB into 12 files under --memory-mib 4, peak RSS {peak[1]} MiB")
    if not any(v in os.environ for v in ("ASAN_OPTIONS", "TSAN_OPTIONS")):
        check(float(peak[1]) < 4 + 28, f"budget: peak RSS {peak[1]} MiB under --memory-mib 4")
    with open(os.path.join(out, INDEX)) as f:
        weight_map = json.load(f)["weight_map"]
    check(sorted(set(weight_map.values())) == names_of(12), f"budget: {set(weight_map.values())}")
    got = {}
    for name in names_of(12):
        got.update(read_safetensors(os.path.join(out, name))[2])
    check(got == tensors, "budget: tensors differ")


def killed_run(tensors, shards):
    """SIGKILL once the first of 24 files is in place (committed once 16 later ones are complete):
    complete files, temporary files of at most 16 + 1, no index; shard, inspect and another
    gather refuse the directory."""
    out = os.path.join(TMP, "hf-killed")
    args = ["gather", "--in", shards, "--out", out, "--max-shard-size", "2MiB", "--memory-mib", "1"]
    proc = subprocess.Popen([BIN] + args, stderr=subprocess.DEVNULL)
    first = os.path.join(out, names_of(24)[0])
    deadline = time.time() + 60
    while not os.path.exists(first) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.0002)
    proc.kill()
    proc.wait()
    names = sorted(os.listdir(out))
    if not check(INDEX not in names, f"kill: the run finished before the kill: {names}"):
        return
    complete = [n for n in names if n.endswith(".safetensors")]
    temporary = [n for n in names if ".safetensors.tmp." in n]
    check(len(complete) >= 1 and len(temporary) <= 17 and
          len(complete) + len(temporary) + 1 == len(names), f"kill: left {names}")
    for name in complete:
        check(set(read_safetensors(os.path.join(out, name))[2]) <= set(tensors), f"kill: {name}")
    r = shard(out, os.path.join(TMP, "hf-killed-again"), nproc=2)
    check(r.returncode == 2 and "no *.safetensors.index.json" in r.stderr,
          f"kill: shard: {r.stderr}")
    r = run(["inspect", out])
    check(r.returncode == 2, f"kill: inspect: exit {r.returncode}: {r.stderr}")
    r = hf_gather(shards, out, "2MiB")
    check(r.returncode == 2 and "is not empty" in first_line(r), f"kill: again: {r.stderr}")


# The huggingface_hub comparison: (label, tensor sizes in bytes, SIZE) — every fill case, a
# tensor larger than SIZE first and between others (huggingface_hub numbers that file first;
# the groups must be the same), everything in one file.
HF_CASES = [("fill", [300, 300, 300, 300, 300], "1KB"),
            ("exact", [1000, 1000, 0, 1, 999], "1000"),
            ("larger-first", [1500, 200, 900, 100, 0, 50], "1kb"),
            ("larger-between", [200, 1500, 300, 2000, 500, 1], "1KB"),
            ("one-file", [10, 20, 0], "1MB"),
            ("one-larger", [5000], "1KB")]


def groups(weight_map):
    files = {}
    for tensor, file in weight_map.items():
        files.setdefault(file, []).append(tensor)
    return sorted(sorted(ts) for ts in files.values())


def compare_with_hf(np, split_factory, save_file, safe_open, label, sizes, size):
    state = {f"t{i:02d}": np.arange(n, dtype=np.uint8) + i for i, n in enumerate(sizes)}
    ck, out = os.path.join(TMP, f"cl-{label}.safetensors"), os.path.join(TMP, f"cl-{label}")
    save_file(state, ck, metadata=METADATA)
    shards = os.path.join(TMP, f"cl-{label}-shards")
    if not check(shard(ck, shards, nproc=2).returncode == 0, f"{label}: shard"):
        return
    r = hf_gather(shards, out, size)
    if not check(r.returncode == 0, f"{label}: gather: {r.stderr}"):
        return
    limit = int(size) if size.isdigit() else size   # huggingface_hub's strings need a unit
    split = split_factory(state, get_storage_size=lambda a: a.nbytes, max_shard_size=limit,
                          filename_pattern="model{suffix}.safetensors")
    sharded = os.path.exists(os.path.join(out, INDEX))
    check(sharded == split.is_sharded,
          f"{label}: index {sharded}, huggingface_hub {split.is_sharded}")
    if sharded:
        with open(os.path.join(out, INDEX)) as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        check(index["metadata"] == split.metadata,
              f"{label}: {index['metadata']} vs {split.metadata}")
    else:
        weight_map = {t: "model.safetensors" for t in state}
    check(groups(weight_map) == groups(split.tensor_to_filename),
          f"{label}: {weight_map} vs huggingface_hub {split.tensor_to_filename}")
    if label != "larger-between":
        check(weight_map == split.tensor_to_filename, f"{label}: file numbers differ")
    for file in sorted(set(weight_map.values())):
        with safe_open(os.path.join(out, file), framework="np") as f:
            check(f.metadata() == METADATA, f"{label}: {file}: metadata {f.metadata()}")
            for name in f.keys():
                got = f.get_tensor(name)
                check(weight_map[name] == file and got.dtype == np.uint8 and
                      np.array_equal(got, state[name]), f"{label}: {file}: {name}")


def main_with_clients():
    import numpy as np
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors import safe_open
    from safetensors.numpy import save_file
    write_plan()
    for label, sizes, size in HF_CASES:
        compare_with_hf(np, split_state_dict_into_shards_factory, save_file, safe_open, label,
                        sizes, size)
    finish("huggingface_hub split")


def main():
    if os.environ.get("HF_SPLIT_CLIENTS") == "1":
        return main_with_clients()
    write_plan()
    rng = random.Random(17)
    originals, shards, single = prepare(rng)
    hf = layout_and_index(shards, originals)
    one_file(shards, single, originals)
    refused_out_dirs(shards, hf)
    bad_sizes(shards)
    round_trip([hf, os.path.join(TMP, "hf-3223"), os.path.join(TMP, "hf-one-1MB")], originals,
               single)
    lone_numbered_file(hf)
    large, large_dir = large_shards(rng)
    under_budget(large, large_dir)
    killed_run(large, large_dir)
    finish("gather --max-shard-size")
    sys.stdout.flush()
    return rerun_with_clients(__file__, "HF_SPLIT_CLIENTS", "huggingface_hub split")


if __name__ == "__main__":
    sys.exit(main())
