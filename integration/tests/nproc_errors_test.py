#!/usr/bin/env python3
"""What `--nproc N` prints when the ranks fail: an error every rank reports is printed once, with
the ranks ("ranks 0-2: shardkit shard: …"), and no launcher exit lines; `shardkit launch` itself
still prints what each rank prints, and its exit lines."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, check, finish, run, tmp_path, write_json,  # noqa: E402
                                write_safetensors)


CK = tmp_path("model.safetensors")
GOOD = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0,
                                          "placements": {"ranks": "all"}}}]}
BAD = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 5,
                                         "placements": {"ranks": "all"}}}]}
DIM_ERROR = 'parameter "w" (rule 0, "w"): dim 5 is out of range for a 2-d tensor'


def one_line(label, r, ranks, command):
    lines = r.stderr.splitlines()
    check(r.returncode == 2, f"{label}: exit {r.returncode}: {r.stderr}")
    check(len(lines) == 1, f"{label}: {len(lines)} lines on stderr, expected 1: {r.stderr}")
    check(lines[:1] and lines[0].startswith(f"{ranks}: shardkit {command}: ") and
          DIM_ERROR in lines[0], f"{label}: {r.stderr}")


def main():
    write_safetensors(CK, {"w": ("F32", [6, 4], bytes(96)), "b": ("F32", [4], bytes(16))})
    good, bad = write_json("good.json", GOOD), write_json("bad.json", BAD)
    r = run(["shard", "--nproc", "3", "--plan", bad, "--checkpoint", CK, "--out", tmp_path("o1")])
    one_line("shard --nproc 3", r, "ranks 0-2", "shard")

    r = run(["shard", "--nproc", "2", "--plan", good, "--checkpoint", CK, "--out", tmp_path("src")])
    check(r.returncode == 0, f"good shard: {r.stderr}")
    check("[rank 0] shardkit shard: 2 parameters (1 sharded, 1 replicated) on 2 ranks" in r.stderr,
          f"good shard: the summary is not rank 0's, as it was: {r.stderr}")
    r = run(["reshard", "--nproc", "2", "--in", tmp_path("src"), "--plan", bad, "--out",
             tmp_path("o2")])
    one_line("reshard --nproc 2", r, "ranks 0, 1", "reshard")

    # shardkit launch keeps its contract: every rank's own line, and one exit line per rank.
    r = run(["launch", "--nproc", "3", "--", BIN, "shard", "--plan", bad, "--checkpoint", CK,
             "--out", tmp_path("o3")])
    check(r.returncode == 2, f"launch: exit {r.returncode}: {r.stderr}")
    for rank in range(3):
        check(f"[rank {rank}] shardkit shard: applying the plan" in r.stderr,
              f"launch: rank {rank}'s own error line is missing: {r.stderr}")
        check(f"shardkit launch: rank {rank} exited with code 2" in r.stderr,
              f"launch: rank {rank}'s exit line is missing: {r.stderr}")
    finish("nproc errors")


if __name__ == "__main__":
    main()
