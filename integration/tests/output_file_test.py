#!/usr/bin/env python3
"""Commands that write a file refuse what they must not replace, exit 2 before writing anything,
and leave it as it was: `gather --out` inside the shard directory it reads (D/index.json,
D/rank-00000.safetensors, D/../D/index.json, through a linked parent), a symbolic link (even to a
safetensors file), a directory, a fifo, a character device (a mknod copy of /dev/null: skipped,
saying so, where mknod is not allowed), an unrelated text file, a short file; an existing
safetensors file is replaced. `gather --max-shard-size` into a directory inside the shard
directory. `demo --summary FILE`: an earlier summary or an empty file is replaced, anything else
refused, also on every rank under a launcher."""

import json
import os
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checkpoint_testlib import (BIN, TMP, check, finish, first_lines_per_rank,  # noqa: E402
                                run, skip, snapshot, write_safetensors)

CK = os.path.join(TMP, "model.safetensors")
D = os.path.join(TMP, "shards")
PRISTINE = os.path.join(TMP, "shards-pristine")  # D restored from it after a case wrecked it
PLAN = os.path.join(TMP, "plan.json")


def setup():
    write_safetensors(CK, {"w.rows": ("F32", [6, 2], bytes(range(48))),
                           "norm": ("U8", [3], b"\x01\x02\x03")}, metadata={"format": "pt"})
    with open(PLAN, "w") as f:
        json.dump({"rules": [{"match": "*.rows", "spec": {"type": "chunk", "dim": 0,
                                                          "placements": {"ranks": "all"}}}]}, f)
    r = run(["shard", "--nproc", "2", "--plan", PLAN, "--checkpoint", CK, "--out", D])
    if not check(r.returncode == 0, f"shard: {r.stderr}"):
        return False
    shutil.copytree(D, PRISTINE)
    return True


def refused(label, out, expected, extra=()):
    """gather --in D --out OUT is exit 2 with `expected` in its one line; D and OUT untouched and
    no temporary file left beside OUT."""
    before_dir, before_out = snapshot(D), snapshot(out)
    r = run(["gather", "--in", D, "--out", out, *extra])
    lines = r.stderr.splitlines()
    check(r.returncode == 2, f"{label}: exit {r.returncode}, expected 2: {r.stderr}")
    check(len(lines) == 1 and lines[0].startswith("shardkit gather: ") and expected in lines[0],
          f"{label}: stderr {r.stderr!r} lacks {expected!r}")
    if not check(snapshot(D) == before_dir, f"{label}: the shard directory changed"):
        shutil.rmtree(D)
        shutil.copytree(PRISTINE, D)  # so that the next cases test what they mean to
    check(snapshot(out) == before_out, f"{label}: {out} changed")
    parent = os.path.dirname(out) or "."
    if os.path.isdir(parent):
        left = [n for n in os.listdir(parent) if ".tmp." in n]
        check(not left, f"{label}: temporary files left: {left}")


def gather_cases():
    inside = f"is inside the shard directory it would be read from ({D}): pick a path outside it"
    for out in [os.path.join(D, "index.json"), os.path.join(D, "rank-00000.safetensors"),
                os.path.join(D, "..", "shards", "index.json"), os.path.join(D, "new.safetensors")]:
        refused(f"--out {out}", out, f"the output file {out} {inside}")
    link = os.path.join(TMP, "linked-shards")
    os.symlink(D, link)
    out = os.path.join(link, "index.json")
    refused("a linked parent", out, f"the output file {out} {inside}")
    hf = os.path.join(D, "hf")
    refused("--max-shard-size into D/hf", hf,
            f"the output directory {hf} is inside the shard directory it would be read from ({D})",
            extra=("--max-shard-size", "1KB"))

    notes = os.path.join(TMP, "notes.txt")
    with open(notes, "w") as f:
        f.write("the user's notes, no checkpoint\n")
    refused("a text file", notes, f"the output file {notes} exists and is not a safetensors file "
            "(its first 8 bytes give a header length of ")
    short = os.path.join(TMP, "short.safetensors")
    with open(short, "wb") as f:
        f.write(b"\x02\x00")
    refused("a 2-byte file", short, "exists and is not a safetensors file (it is 2 bytes long")

    target = os.path.join(TMP, "target.safetensors")
    with open(CK, "rb") as a, open(target, "wb") as b:
        b.write(a.read())
    symlink = os.path.join(TMP, "link.safetensors")
    os.symlink(target, symlink)
    refused("a symbolic link", symlink, f"the output file {symlink} is a symbolic link: shardkit "
            "neither follows nor replaces one")
    directory = os.path.join(TMP, "a-directory.safetensors")
    os.makedirs(directory)
    refused("a directory", directory, f"the output file {directory} exists and is a directory, "
            "not a regular file: refusing to replace it")
    fifo = os.path.join(TMP, "a-fifo")
    os.mkfifo(fifo)
    refused("a fifo", fifo, "exists and is a fifo, not a regular file")
    null_copy = os.path.join(TMP, "null-copy")
    try:
        os.mknod(null_copy, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        skip("character device", f"mknod: {e}")
    else:
        refused("a character device", null_copy, f"the output file {null_copy} exists and is a "
                "character device, not a regular file: refusing to replace it")

    # An earlier checkpoint is replaced, and so is a safetensors file the link pointed to.
    earlier = os.path.join(TMP, "earlier.safetensors")
    write_safetensors(earlier, {"old": ("U8", [1], b"\x00")})
    for out in [earlier, target]:
        r = run(["gather", "--in", D, "--out", out])
        check(r.returncode == 0, f"replacing {out}: exit {r.returncode}: {r.stderr}")
        with open(CK, "rb") as a, open(out, "rb") as b:
            check(a.read() == b.read(), f"replacing {out}: not the original checkpoint")


def demo(args, **kwargs):
    return run(["demo", "--nproc", "1", *args], timeout=120, **kwargs)


def demo_cases():
    start = "shardkit demo: "
    summary = os.path.join(TMP, "summary.txt")
    for label, content in [("a new file", None), ("an earlier summary", "keep"), ("empty", "")]:
        if content == "":
            open(summary, "w").close()
        elif content is None and os.path.exists(summary):
            os.remove(summary)
        r = demo(["--summary", summary])
        check(r.returncode == 0 and r.stdout == "", f"--summary, {label}: exit {r.returncode}: "
              f"{r.stderr} / stdout {r.stdout!r}")
        text = snapshot(summary)[1] if os.path.isfile(summary) else b""
        text = text.decode(errors="replace")
        check(text.startswith(start) and "verified: all" in text and "total time:" in text,
              f"--summary, {label}: {text!r}")

    def refused_summary(label, path, expected, launcher=False):
        before = snapshot(path)
        if launcher:
            r = run(["launch", "--nproc", "2", "--", BIN, "demo", "--summary", path])
        else:
            r = demo(["--summary", path])
        check(r.returncode == 2, f"--summary {label}: exit {r.returncode}: {r.stderr}")
        if launcher:
            firsts = first_lines_per_rank(r.stderr, 2)
            check(len(firsts) == 2 and all(expected in line for line in firsts.values()),
                  f"--summary {label}: not every rank refused: {r.stderr}")
        else:
            check(r.stderr.startswith(f"shardkit demo: --summary {path} {expected}") and
                  r.stderr.count("\n") == 1, f"--summary {label}: {r.stderr!r}")
        check("[rank" not in r.stderr or launcher, f"--summary {label}: ranks started: {r.stderr}")
        check(snapshot(path) == before, f"--summary {label}: {path} changed")

    thesis = os.path.join(TMP, "thesis.tex")
    with open(thesis, "w") as f:
        f.write("\\documentclass{article}\n")
    refused_summary("a text file", thesis, "exists and is not an earlier summary (it is not empty "
                    "and does not begin with \"shardkit demo: \"): refusing to replace it")
    refused_summary("a checkpoint", CK, "exists and is not an earlier summary")
    link = os.path.join(TMP, "summary-link.txt")
    os.symlink(summary, link)
    refused_summary("a symbolic link", link, "is a symbolic link")
    refused_summary("a directory", os.path.join(TMP, "a-directory.safetensors"),
                    "exists and is a directory")
    null_copy = os.path.join(TMP, "null-copy")
    if os.path.exists(null_copy):
        refused_summary("a character device", null_copy, "exists and is a character device")
    refused_summary("under a launcher", thesis, "exists and is not an earlier summary",
                    launcher=True)


def main():
    if setup():
        gather_cases()
        demo_cases()
    finish("output file")


if __name__ == "__main__":
    main()
