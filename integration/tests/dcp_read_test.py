#!/usr/bin/env python3
"""PyTorch DCP checkpoints read by the real binary: the fixtures torch 2.15 wrote
(integration/formats/dcp/testdata, make_fixtures.py) through `inspect`, `gather`, `reshard --in`
and `spec check --checkpoint`; torch itself is not needed here.

- gather (one file, and --max-shard-size into a Hugging Face directory) of `basic` (world 1:
  F32, BF16, I64, FP8, U16, an empty tensor, a chunk saved with transposed strides), `sharded`
  (world 4: rows, columns, a 2-D grid, a replicated tensor) and `local` (the same saved with
  use_collectives=False: __R.metadata files): every tensor's bytes are what torch saved; the
  non-tensor items of `basic` are named in one warning.
- reshard --in a DCP directory on 3 ranks and on 1, the dims changed: gather of the result is
  byte-identical to gather of the DCP directory; the summary names the input as PyTorch DCP.
- inspect: one row per tensor with its chunk count, the non-tensor items listed.
- `hf_sharded` (torch's HuggingFaceStorageWriter with save_distributed: safetensors files placed
  by DCP_SHARDING_INFO) through gather, reshard --in and inspect, as a DCP checkpoint.
- Refusals, exit 2: `shard --checkpoint DCP_DIR` (pointing to `reshard --in`), for both kinds, the SAFETENSORS
  writer's output, a truncated `.distcp` file (named), a missing one; reshard of a truncated one
  fails every rank with the same first line.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (check, expect_every_rank, finish, read_safetensors, run,  # noqa: E402
                                tmp_path, write_json)

FIXTURES = os.path.join(os.environ.get("TEST_SRCDIR", "."),
                        "shardkit/integration/formats/dcp/testdata")
EVERY = {"ranks": "all"}


def fixture(name):
    return os.path.join(FIXTURES, name)


def expected(name):
    folder = fixture(name + ".expected")
    out = {}
    for entry in sorted(os.listdir(folder)):
        with open(os.path.join(folder, entry), "rb") as f:
            out[entry[:-len(".bin")]] = f.read()
    return out


def gathered_tensors(path):
    return {name: data for name, (_, _, data) in read_safetensors(path)[2].items()}


def hf_tensors(folder):
    out = {}
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(".safetensors"):
            out.update(gathered_tensors(os.path.join(folder, entry)))
    return out


def test_gather(name):
    out = tmp_path(f"{name}.safetensors")
    r = run(["gather", "--in", fixture(name), "--out", out])
    check(r.returncode == 0, f"gather {name}: exit {r.returncode}: {r.stderr}")
    if r.returncode != 0:
        return
    want = expected(name)
    check(gathered_tensors(out) == want, f"gather {name}: bytes differ from torch's")
    files = "safetensors files" if name == "hf_sharded" else ".distcp files"
    check(f"{files} to" in r.stderr, f"gather {name}: summary: {r.stderr}")
    hf = tmp_path(f"{name}-hf")
    r = run(["gather", "--in", fixture(name), "--out", hf, "--max-shard-size", "100"])
    check(r.returncode == 0, f"gather {name} --max-shard-size: exit {r.returncode}: {r.stderr}")
    check(hf_tensors(hf) == want, f"gather {name} --max-shard-size: bytes differ from torch's")
    if name == "basic":
        check(len(os.listdir(hf)) > 2, f"gather basic --max-shard-size 100: one file: {os.listdir(hf)}")
        warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
        check(len(warnings) == 1 and "3 non-tensor items are not read" in warnings[0] and
              "blob, opt.param_groups.0.lr, step" in warnings[0], f"gather basic: {warnings}")


def test_reshard():
    plan = write_json("plan.json", {"rules": [
        {"match": "rows", "spec": {"type": "chunk", "dim": 1, "placements": EVERY}},
        {"match": "grid", "spec": {"type": "chunk", "dim": 0, "placements": EVERY}},
        {"match": "cols", "spec": {"type": "chunk", "dim": 0, "placements": EVERY}}]})
    reference = gathered_tensors(tmp_path("sharded.safetensors"))
    for source in ("sharded", "local"):
        for world in (3, 1):
            out = tmp_path(f"re-{source}-{world}")
            r = run(["reshard", "--in", fixture(source), "--plan", plan, "--out", out,
                     "--nproc", str(world)])
            label = f"reshard --in {source} --nproc {world}"
            check(r.returncode == 0, f"{label}: exit {r.returncode}: {r.stderr}")
            check("(PyTorch DCP, 4 .distcp files)" in r.stderr, f"{label}: summary: {r.stderr}")
            with open(os.path.join(out, "index.json")) as f:
                index = json.load(f)
            check(index["world_size"] == world, f"{label}: index.json world {index['world_size']}")
            back = tmp_path(f"re-{source}-{world}.safetensors")
            r = run(["gather", "--in", out, "--out", back])
            check(r.returncode == 0 and gathered_tensors(back) == reference,
                  f"{label}: gathered back differs from the DCP directory's: {r.stderr}")


def test_inspect():
    r = run(["inspect", fixture("sharded")])
    check(r.returncode == 0, f"inspect sharded: exit {r.returncode}: {r.stderr}")
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.strip()}
    check(rows.get("grid") == ["grid", "I64", "[5,", "7]", "280", "4"], f"inspect: {rows.get('grid')}")
    check(rows.get("bias", [""])[-1] == "1", f"inspect: bias: {rows.get('bias')}")
    check("PyTorch DCP" in r.stdout and "distcp_files  4" in r.stdout, f"inspect: {r.stdout}")
    r = run(["inspect", fixture("basic")])
    check(r.returncode == 0 and "non-tensor    3 items (not tensors; carried by --format dcp, else "
          "not read): " in r.stdout,
          f"inspect basic: {r.stdout}{r.stderr}")
    r = run(["spec", "check", tmp_path("plan.json"), "--checkpoint", fixture("sharded"),
             "--world", "3"])
    check(r.returncode == 0 and "chunk(dim=1)" in r.stdout and "reshard" in r.stdout,
          f"spec check --checkpoint DCP: {r.returncode}: {r.stdout}{r.stderr}")


def test_hf_sharded():
    """torch's HuggingFaceStorageWriter(save_distributed=True) on 2 ranks: resharded onto 3 ranks
    and gathered back, the same bytes; inspect counts its pieces."""
    out = tmp_path("re-hf")
    r = run(["reshard", "--in", fixture("hf_sharded"), "--plan", tmp_path("plan.json"), "--out",
             out, "--nproc", "3"])
    check(r.returncode == 0 and "(PyTorch DCP, 2 safetensors files)" in r.stderr,
          f"reshard --in hf_sharded: {r.returncode}: {r.stderr}")
    back = tmp_path("re-hf.safetensors")
    r = run(["gather", "--in", out, "--out", back])
    check(r.returncode == 0 and gathered_tensors(back) == expected("hf_sharded"),
          f"reshard --in hf_sharded, gathered back: {r.stderr}")
    r = run(["inspect", fixture("hf_sharded")])
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.strip()}
    check(r.returncode == 0 and rows.get("rows", [""])[-1] == "2" and
          rows.get("bias", [""])[-1] == "1" and "Hugging Face writer" in r.stdout,
          f"inspect hf_sharded: {r.stdout}{r.stderr}")


def test_refusals():
    for name in ("sharded", "hf_sharded"):
        r = run(["shard", "--checkpoint", fixture(name), "--plan", tmp_path("plan.json"),
                 "--out", tmp_path("never")])
        expect_every_rank(f"shard --checkpoint {name}", r, 1, "is a PyTorch DCP checkpoint",
                          "reshard --in")
    r = run(["gather", "--in", fixture("safetensors"), "--out", tmp_path("never.safetensors")])
    expect_every_rank("gather SAFETENSORS writer", r, 1, "serialization_format=SAFETENSORS")
    broken = tmp_path("broken")
    shutil.copytree(fixture("sharded"), broken)
    with open(os.path.join(broken, "__1_0.distcp"), "r+b") as f:
        f.truncate(1000)
    r = run(["gather", "--in", broken, "--out", tmp_path("never.safetensors")])
    expect_every_rank("gather truncated", r, 1, "__1_0.distcp")
    r = run(["reshard", "--in", broken, "--plan", tmp_path("plan.json"), "--out",
             tmp_path("never-re"), "--nproc", "3"])
    expect_every_rank("reshard truncated", r, 3, "__1_0.distcp")
    check(not os.path.exists(tmp_path("never-re", "index.json")), "reshard truncated: index.json")
    os.remove(os.path.join(broken, "__1_0.distcp"))
    r = run(["gather", "--in", broken, "--out", tmp_path("never.safetensors")])
    expect_every_rank("gather missing file", r, 1, "__1_0.distcp: no such file")


def main():
    for name in ("basic", "sharded", "local", "hf_sharded"):
        test_gather(name)
    test_reshard()
    test_hf_sharded()
    test_inspect()
    test_refusals()
    finish("dcp_read_test")


if __name__ == "__main__":
    main()
