#!/usr/bin/env python3
"""`--format dcp` through the real binary, checked without torch (dcp_torch_test checks the same
output with torch itself): shard (scatter, direct), reshard and gather write PyTorch DCP
directories that shardkit's own reader gives back byte for byte.

- shard --format dcp of checkpoint_test's checkpoint (every byte-sized dtype, chunk and
  enumerable specs, replicated parameters) on 3 ranks, scatter and direct: `__R_0.distcp` per rank
  and `.metadata`; no index.json; gather gives back the checkpoint's tensors; inspect lists them.
- A replicated parameter is written once (one chunk, on the source), not once per rank.
- reshard DCP -> DCP on 2 ranks, then gather: the same tensors; gather --format dcp: one
  __0_0.distcp; inspect: chunks 1 each.
- Earlier output: a second shard of 2 ranks into the same directory replaces the whole earlier
  output (__2_0.distcp goes); shardkit's own output of the other format is replaced too, either
  way, leaving nothing beside the directory. (A DCP checkpoint torch wrote is refused:
  training_checkpoint_test.)
- Flags: --format bogus and gather --format dcp --max-shard-size are exit 2 naming the flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_test  # noqa: E402  (its checkpoint: every byte-sized dtype)
from checkpoint_testlib import (TMP, check, expect_every_rank, finish, read_safetensors, run,  # noqa: E402
                                write_safetensors)


def tensors_of(path):
    return {name: (dtype, shape, data) for name, (dtype, shape, data) in
            read_safetensors(path)[2].items()}


def inspect_rows(path):
    r = run(["inspect", path])
    check(r.returncode == 0, f"inspect {path}: {r.stderr}")
    rows = {}
    for line in r.stdout.splitlines():
        cells = line.split()
        if cells and cells[0] not in ("name", "format", "metadata", "version", "distcp_files"):
            rows[cells[0]] = cells
    return r.stdout, rows


def gathered(dcp_dir, label):
    out = os.path.join(TMP, label + ".safetensors")
    r = run(["gather", "--in", dcp_dir, "--out", out])
    check(r.returncode == 0, f"{label}: gather: {r.stderr}")
    return tensors_of(out) if r.returncode == 0 else {}


def summary_tensors(stderr):
    """The `tensors` column of a shard summary's rank rows ("[rank 0]   1     __1_0.distcp  7 …")."""
    counts = []
    for line in stderr.splitlines():
        cells = line.split()
        if len(cells) > 4 and cells[0] == "[rank" and cells[3].endswith(".distcp"):
            counts.append(int(cells[4]))
    return counts


def main():
    tensors = checkpoint_test.make_checkpoint()
    ckpt = os.path.join(TMP, "model.safetensors")
    write_safetensors(ckpt, tensors, checkpoint_test.METADATA)
    original = tensors_of(ckpt)
    plan3 = checkpoint_test.make_plan(3)
    for strategy in ("scatter", "direct"):
        out = os.path.join(TMP, f"dcp-{strategy}")
        r = run(["shard", "--checkpoint", ckpt, "--plan", plan3, "--out", out, "--format", "dcp",
                 "--strategy", strategy, "--nproc", "3"], timeout=120)
        check(r.returncode == 0, f"shard --format dcp ({strategy}): {r.stderr}")
        names = sorted(os.listdir(out)) if os.path.isdir(out) else []
        check(names == [".metadata", ".shardkit-output", "__0_0.distcp", "__1_0.distcp",
                        "__2_0.distcp"],
              f"shard --format dcp ({strategy}): files {names}")
        check("__0_0.distcp" in r.stderr, f"shard --format dcp: summary names files: {r.stderr}")
        check(gathered(out, f"dcp-{strategy}-back") == original,
              f"shard --format dcp ({strategy}): gathered tensors differ from the checkpoint")
    text, rows = inspect_rows(os.path.join(TMP, "dcp-scatter"))
    check("PyTorch DCP" in text, f"inspect: {text}")
    for name in ("norm.weight", "mask", "scale", "bytes"):  # checkpoint_test's replicated ones
        check(rows.get(name, [""])[-1] == "1", f"replicated {name}: chunks {rows.get(name)}")
    # The summary counts on each rank the tensors its .distcp holds: every chunk once.
    counted = summary_tensors(r.stderr)
    check(sum(counted) == sum(int(cells[-1]) for cells in rows.values()),
          f"shard --format dcp: the summary counts {counted} tensors, the files hold "
          f"{sum(int(cells[-1]) for cells in rows.values())} chunks")

    plan2 = checkpoint_test.make_plan(2)
    re2 = os.path.join(TMP, "dcp-re2")
    r = run(["reshard", "--in", os.path.join(TMP, "dcp-scatter"), "--plan", plan2, "--out", re2,
             "--format", "dcp", "--nproc", "2"], timeout=120)
    check(r.returncode == 0, f"reshard dcp -> dcp: {r.stderr}")
    check(gathered(re2, "dcp-re2-back") == original, "reshard dcp -> dcp: tensors differ")
    one = os.path.join(TMP, "dcp-one")
    r = run(["gather", "--in", re2, "--out", one, "--format", "dcp"])
    check(r.returncode == 0, f"gather --format dcp: {r.stderr}")
    check(sorted(os.listdir(one)) == [".metadata", ".shardkit-output", "__0_0.distcp"]
          if os.path.isdir(one) else False,
          f"gather --format dcp: files {os.listdir(one) if os.path.isdir(one) else None}")
    check(gathered(one, "dcp-one-back") == original, "gather --format dcp: tensors differ")
    _, rows = inspect_rows(one)
    check(rows and all(cells[-1] == "1" for cells in rows.values()), f"gather --format dcp: {rows}")

    # A smaller world into the same directory: the earlier rank's file and metadata go.
    again = os.path.join(TMP, "dcp-scatter")
    r = run(["shard", "--checkpoint", ckpt, "--plan", plan2, "--out", again, "--format", "dcp",
             "--nproc", "2"], timeout=120)
    check(r.returncode == 0, f"shard again, 2 ranks: {r.stderr}")
    check(sorted(os.listdir(again)) == [".metadata", ".shardkit-output", "__0_0.distcp",
                                        "__1_0.distcp"],
          f"shard again: files {sorted(os.listdir(again))}")
    check(gathered(again, "again-back") == original, "shard again: tensors differ")

    # shardkit's own output of the other format is replaced as a whole, either way.
    shardkit_dir = os.path.join(TMP, "shardkit-dir")
    r = run(["shard", "--checkpoint", ckpt, "--plan", plan2, "--out", shardkit_dir, "--nproc", "2"],
            timeout=120)
    check(r.returncode == 0, f"shard (default format): {r.stderr}")
    r = run(["shard", "--checkpoint", ckpt, "--plan", plan2, "--out", shardkit_dir, "--format",
             "dcp", "--nproc", "2"], timeout=120)
    check(r.returncode == 0, f"dcp over a shard directory: {r.stderr}")
    check(sorted(os.listdir(shardkit_dir)) == [".metadata", ".shardkit-output", "__0_0.distcp",
                                               "__1_0.distcp"],
          f"dcp over a shard directory: files {sorted(os.listdir(shardkit_dir))}")
    check(gathered(shardkit_dir, "over-shards-back") == original, "dcp over shards: tensors differ")
    r = run(["shard", "--checkpoint", ckpt, "--plan", plan2, "--out", again, "--nproc", "2"],
            timeout=120)
    check(r.returncode == 0, f"shards over a DCP directory: {r.stderr}")
    check(sorted(os.listdir(again)) == ["index.json", "rank-00000.safetensors",
                                        "rank-00001.safetensors"],
          f"shards over a DCP directory: files {sorted(os.listdir(again))}")
    check(sorted(n for n in os.listdir(TMP) if "shardkit-new" in n) == [],
          f"directories left beside: {os.listdir(TMP)}")

    r = run(["shard", "--checkpoint", ckpt, "--plan", plan2, "--out", os.path.join(TMP, "x"),
             "--format", "bogus"])
    check(r.returncode == 2 and "--format: expected shardkit or dcp, got \"bogus\"" in r.stderr,
          f"--format bogus: {r.returncode}: {r.stderr}")
    r = run(["gather", "--in", re2, "--out", os.path.join(TMP, "y"), "--format", "dcp",
             "--max-shard-size", "1MB"])
    check(r.returncode == 2 and "--max-shard-size does not apply to --format dcp" in r.stderr,
          f"gather --format dcp --max-shard-size: {r.returncode}: {r.stderr}")
    finish("dcp_write_test")


if __name__ == "__main__":
    main()
