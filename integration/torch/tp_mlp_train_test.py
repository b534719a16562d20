#!/usr/bin/env python3
"""tp_mlp_train under the real `shardkit launch` on 1-4 Gloo ranks against tp_mlp_reference (the
same training in one process with plain LibTorch): the trained weights agree within 1e-5 after
20 steps, including an H not divisible by the world and an H below it (zero-size shards); the loss
lines; a bad IN is exit 2 with the same message on every rank; `shardkit gather` of --save-shards
equals OUT. An OUT rank 0 must not replace (IN itself, inside --save-shards, a symbolic link, a
directory, a character device, a file that is not a safetensors file) is exit 2 with the same
message on every rank before any step, and left as it was; an earlier OUT is replaced."""

import json
import os
import random
import stat
import struct
import subprocess
import sys

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit")
sys.path.insert(0, os.path.join(RUNFILES, "integration/tests"))
import checkpoint_testlib as lib  # noqa: E402

SHARDKIT = os.path.join(RUNFILES, "integration/shardkit")
TRAIN = os.path.join(RUNFILES, "integration/torch/tp_mlp_train")
REFERENCE = os.path.join(RUNFILES, "integration/torch/tp_mlp_reference")
STEPS, LR, TOLERANCE = 20, 0.1, 1e-5
D, O, B = 5, 3, 6


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def make_input(path, hidden, seed, overrides=None):
    rng = random.Random(seed)
    def uniform(n, scale):
        return [rng.uniform(-scale, scale) for _ in range(n)]
    tensors = {
        "fc1.weight": ("F32", [hidden, D], f32(uniform(hidden * D, 0.5))),
        "fc2.weight": ("F32", [O, hidden], f32(uniform(O * hidden, 0.5))),
        "x": ("F32", [B, D], f32(uniform(B * D, 1.0))),
        "y": ("F32", [B, O], f32(uniform(B * O, 1.0))),
    }
    tensors.update(overrides or {})
    lib.write_safetensors(path, {k: v for k, v in tensors.items() if v is not None})


def train_args(inp, out, steps=STEPS):
    return ["--checkpoint", inp, "--steps", str(steps), "--lr", str(LR), "--out", out]


def launch(world, args):
    return subprocess.run([SHARDKIT, "launch", "--nproc", str(world), "--timeout", "60", "--",
                           TRAIN] + args, capture_output=True, text=True, timeout=300)


def floats(blob):
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def losses(stdout, prefix):
    return [float(line.split()[-1]) for line in stdout.splitlines() if line.startswith(prefix)]


def check_against_reference(world, hidden):
    label = f"world {world}, H {hidden}"
    inp = os.path.join(lib.TMP, f"in-{world}-{hidden}.safetensors")
    out = os.path.join(lib.TMP, f"out-{world}-{hidden}.safetensors")
    ref = os.path.join(lib.TMP, f"ref-{world}-{hidden}.safetensors")
    make_input(inp, hidden, seed=world * 100 + hidden)
    expected = subprocess.run([REFERENCE] + train_args(inp, ref), capture_output=True, text=True)
    if not lib.check(expected.returncode == 0, f"{label}: reference failed: {expected.stderr}"):
        return
    got = launch(world, train_args(inp, out))
    if not lib.check(got.returncode == 0, f"{label}: exit {got.returncode}: {got.stderr}"):
        return
    mine, theirs = losses(got.stdout, "[rank 0] step "), losses(expected.stdout, "step ")
    lib.check(len(mine) == STEPS and len(theirs) == STEPS, f"{label}: {len(mine)} loss lines")
    lib.check(all(abs(a - b) <= TOLERANCE * max(1, abs(b)) for a, b in zip(mine, theirs)),
              f"{label}: losses {mine} vs reference {theirs}")
    lib.check(mine[-1] < mine[0], f"{label}: the loss did not go down: {mine}")
    lib.check(all(line.startswith("[rank 0] step ") for line in got.stdout.splitlines()),
              f"{label}: unexpected stdout {got.stdout!r}")
    _, _, trained = lib.read_safetensors(out)
    _, _, reference = lib.read_safetensors(ref)
    lib.check(sorted(trained) == ["fc1.weight", "fc2.weight"], f"{label}: OUT holds {sorted(trained)}")
    for name in sorted(reference):
        dtype, shape, blob = trained.get(name, (None, None, b""))
        lib.check(dtype == "F32" and shape == reference[name][1], f"{label}: {name} {dtype} {shape}")
        diff = max((abs(a - b) for a, b in zip(floats(blob), floats(reference[name][2]))), default=0)
        lib.check(len(blob) == len(reference[name][2]) and diff <= TOLERANCE,
                  f"{label}: {name} differs from the reference by {diff}")
    print(f"{label}: max loss diff {max(abs(a - b) for a, b in zip(mine, theirs)):.3g}", flush=True)


def check_bad_input(name, overrides, needle):
    inp = os.path.join(lib.TMP, f"bad-{name}.safetensors")
    out = os.path.join(lib.TMP, f"bad-{name}-out.safetensors")
    make_input(inp, 4, seed=7, overrides=overrides)
    got = launch(3, train_args(inp, out))
    lib.check(got.returncode == 2, f"bad IN {name}: exit {got.returncode}, expected 2: {got.stderr}")
    firsts = lib.first_lines_per_rank(got.stderr, 3)
    lib.check(len(firsts) == 3 and len(set(firsts.values())) == 1,
              f"bad IN {name}: first lines differ between ranks: {firsts}")
    lib.check(needle in firsts.get(0, ""), f"bad IN {name}: {firsts.get(0)!r} lacks {needle!r}")
    lib.check(not os.path.exists(out), f"bad IN {name}: OUT was written")


def check_refused_out():
    inp = os.path.join(lib.TMP, "guard-in.safetensors")
    make_input(inp, 4, seed=11)
    shards = os.path.join(lib.TMP, "guard-shards")
    notes = os.path.join(lib.TMP, "guard-notes.txt")
    with open(notes, "w") as f:
        f.write("not a checkpoint\n")
    link = os.path.join(lib.TMP, "guard-link.safetensors")
    os.symlink(inp, link)
    directory = os.path.join(lib.TMP, "guard-dir")
    os.makedirs(directory)
    cases = [
        ("IN itself", inp, [], f"the output file {inp} is the checkpoint it would be read from "
         f"({inp}): pick another path"),
        ("IN through ..", os.path.join(lib.TMP, "..", os.path.basename(lib.TMP),
                                       "guard-in.safetensors"), [], "is the checkpoint it would"),
        ("inside --save-shards", os.path.join(shards, "trained.safetensors"),
         ["--save-shards", shards], f"is inside the --save-shards directory ({shards})"),
        ("a text file", notes, [], f"the output file {notes} exists and is not a safetensors file"),
        ("a symbolic link", link, [], f"the output file {link} is a symbolic link"),
        ("a directory", directory, [], "exists and is a directory, not a regular file"),
    ]
    device = os.path.join(lib.TMP, "guard-null-copy")
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        cases.append(("a character device", device, [], "exists and is a character device"))
    except OSError as e:
        lib.skip("--out a character device", f"mknod: {e}")
    for label, out, extra, needle in cases:
        make_input(inp, 4, seed=11)  # afresh: each case must be refused for its own reason
        before, before_in = lib.snapshot(out), lib.snapshot(inp)
        got = launch(2, train_args(inp, out, steps=2) + extra)
        lib.check(got.returncode == 2, f"--out {label}: exit {got.returncode}: {got.stderr}")
        firsts = lib.first_lines_per_rank(got.stderr, 2)
        lib.check(len(firsts) == 2 and len(set(firsts.values())) == 1 and
                  firsts[0].startswith("tp_mlp_train: --out: rank 0: ") and needle in firsts[0],
                  f"--out {label}: first lines {firsts} lack {needle!r}")
        lib.check("step" not in got.stdout, f"--out {label}: trained anyway: {got.stdout!r}")
        lib.check(lib.snapshot(out) == before and lib.snapshot(inp) == before_in,
                  f"--out {label}: {out} or IN changed")
        lib.check(not os.path.exists(shards), f"--out {label}: --save-shards was written")
    make_input(inp, 4, seed=11)
    earlier = os.path.join(lib.TMP, "guard-earlier.safetensors")
    lib.write_safetensors(earlier, {"old": ("U8", [1], b"\x00")})
    got = launch(2, train_args(inp, earlier, steps=2))
    lib.check(got.returncode == 0,
              f"--out an earlier checkpoint: exit {got.returncode}: {got.stderr}")
    lib.check(sorted(lib.read_safetensors(earlier)[2]) == ["fc1.weight", "fc2.weight"],
              "--out an earlier checkpoint: not replaced by the trained weights")


def check_save_shards(world, hidden):
    """--save-shards writes the trained parameters' shards (strategy "save"); `shardkit gather` of
    that directory equals OUT byte for byte."""
    label = f"--save-shards, world {world}, H {hidden}"
    inp = os.path.join(lib.TMP, f"save-{world}.safetensors")
    out = os.path.join(lib.TMP, f"save-{world}-out.safetensors")
    shards = os.path.join(lib.TMP, f"shards-{world}")
    gathered = os.path.join(lib.TMP, f"save-{world}-gathered.safetensors")
    make_input(inp, hidden, seed=world + 3)
    got = launch(world, train_args(inp, out, steps=3) + ["--save-shards", shards])
    if not lib.check(got.returncode == 0, f"{label}: exit {got.returncode}: {got.stderr}"):
        return
    with open(os.path.join(shards, "index.json")) as f:
        index = json.load(f)
    lib.check(index.get("strategy") == "save" and index.get("world_size") == world and
              sorted(index.get("parameters", {})) == ["fc1.weight", "fc2.weight"],
              f"{label}: index.json {index}")
    g = subprocess.run([SHARDKIT, "gather", "--in", shards, "--out", gathered],
                       capture_output=True, text=True, timeout=120)
    if not lib.check(g.returncode == 0, f"{label}: gather exit {g.returncode}: {g.stderr}"):
        return
    _, _, trained = lib.read_safetensors(out)
    _, _, back = lib.read_safetensors(gathered)
    lib.check(sorted(back) == sorted(trained), f"{label}: gathered {sorted(back)}")
    for name in sorted(trained):
        lib.check(back.get(name) == trained[name], f"{label}: gathered {name} differs from OUT")


def main():
    for world, hidden in [(1, 8), (2, 8), (3, 8), (4, 6), (4, 3)]:
        check_against_reference(world, hidden)
    check_bad_input("missing", {"y": None}, 'tensor "y" is missing')
    check_bad_input("dtype", {"x": ("F64", [B, D], struct.pack(f"<{B * D}d", *[0.0] * (B * D)))},
                    'tensor "x" is F64')
    check_bad_input("shapes", {"fc2.weight": ("F32", [O, 5], f32([0.0] * (O * 5)))},
                    "inconsistent shapes")
    check_save_shards(3, 8)
    check_save_shards(4, 3)
    check_refused_out()
    lib.finish("tp_mlp_train")


if __name__ == "__main__":
    main()
