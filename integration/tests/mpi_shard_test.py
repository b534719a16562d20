#!/usr/bin/env python3
"""`mpirun -np 3 shardkit shard …` with SHARDKIT_BACKEND=mpi (the plugin libshardkit_backend_mpi.so,
found on SHARDKIT_PLUGIN_PATH) writes the same shard directory
as `shardkit shard --nproc 3` with Gloo: byte-identical rank files, equivalent index.json — for
checkpoint_test's checkpoint (every byte-sized dtype, zero-size shards) with scatter and
broadcast, and for a 6 MiB tensor streamed under a 1 MiB memory budget (several rounds, messages
larger than the agreement's); and `reshard` of the MPI output onto 2 ranks. Rank and world come from MPI alone (no SHARDKIT_RANK); options
that disagree with MPI are exit 2 on every rank."""

import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_test  # noqa: E402  (its checkpoint and plan)
from checkpoint_testlib import (TMP, check, finish, run, same_directories,  # noqa: E402
                                write_safetensors)

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit")
MPI_BIN = os.path.join(RUNFILES, "integration/shardkit")  # the contract binary: Gloo built in
MPIRUN = ["mpirun", "-np", "3", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
# What a user's environment under mpirun has: no SHARDKIT_* launcher variables. TMPDIR: Open
# MPI's session directory in this test's own folder.
ENV = dict({k: v for k, v in os.environ.items() if not k.startswith("SHARDKIT_")}, TMPDIR=TMP,
           SHARDKIT_PLUGIN_PATH=os.path.join(RUNFILES, "backends/mpi"))


def mpi_shard(args, extra_env=None, command="shard", nproc=3):
    env = dict(ENV, SHARDKIT_BACKEND="mpi", **(extra_env or {}))
    mpirun = MPIRUN[:2] + [str(nproc)] + MPIRUN[3:]
    return subprocess.run(mpirun + [MPI_BIN, command] + args, capture_output=True, text=True,
                          timeout=120, env=env)


def same_output(label, args, command="shard", nproc=3):
    """Runs `command` with Gloo (--nproc) and under mpirun; compares the two directories."""
    gloo_out, mpi_out = os.path.join(TMP, label + "-gloo"), os.path.join(TMP, label + "-mpi")
    r = run([command] + args + ["--out", gloo_out, "--nproc", str(nproc)])
    if not check(r.returncode == 0, f"{label}: gloo {command} exit {r.returncode}: {r.stderr}"):
        return
    r = mpi_shard(args + ["--out", mpi_out], command=command, nproc=nproc)
    if not check(r.returncode == 0, f"{label}: mpirun {command} exit {r.returncode}: {r.stderr}"):
        return
    if same_directories(mpi_out, gloo_out, nproc, label):
        print(f"{label}: same files from mpirun -np {nproc} (mpi) and --nproc {nproc} (gloo)")


def big_checkpoint():
    blob = random.Random(18).randbytes(6 << 20)
    path = os.path.join(TMP, "big.safetensors")
    write_safetensors(path, {"big.weight": ("F32", [1536, 1024], blob)})
    plan = os.path.join(TMP, "big-plan.json")
    with open(plan, "w") as f:
        json.dump({"version": 1, "rules": [{"match": "big.weight", "spec": {
            "type": "chunk", "dim": 0, "placements": {"ranks": "all", "device": "cpu"}}}]}, f)
    return path, plan


def disagreeing_options():
    """SHARDKIT_RANK/SHARDKIT_WORLD_SIZE that contradict MPI: exit 2 on every rank, and mpirun's."""
    out = os.path.join(TMP, "disagree")
    env = {"SHARDKIT_RANK": "0", "SHARDKIT_WORLD_SIZE": "2",
           "SHARDKIT_STORE": "file://" + os.path.join(TMP, "unused-store")}
    r = mpi_shard(["--plan", checkpoint_test.make_plan(3), "--checkpoint",
                   os.path.join(TMP, "model.safetensors"), "--out", out], env)
    check(r.returncode == 2, f"disagreeing options: mpirun exit {r.returncode}, expected 2")
    errors = [line for line in r.stderr.splitlines() if "disagree with MPI_COMM_WORLD" in line]
    check(len(errors) == 3, f"disagreeing options: {len(errors)} ranks said so, expected 3:\n"
          f"{r.stderr}")
    check(all("ranks 0-2 disagree" in line for line in errors), f"the ranks are named: {errors}")
    check(not os.path.exists(os.path.join(out, "index.json")), "no index.json written")


def main():
    ck = os.path.join(TMP, "model.safetensors")
    write_safetensors(ck, checkpoint_test.make_checkpoint(), checkpoint_test.METADATA)
    plan = checkpoint_test.make_plan(3)
    same_output("scatter", ["--plan", plan, "--checkpoint", ck])
    same_output("broadcast", ["--plan", plan, "--checkpoint", ck, "--strategy", "broadcast"])
    big, big_plan = big_checkpoint()
    same_output("big", ["--plan", big_plan, "--checkpoint", big, "--memory-mib", "1"])
    # The MPI run's shard directory laid out anew on 2 ranks (reshard: range reads, AllToAll).
    same_output("reshard", ["--in", os.path.join(TMP, "scatter-mpi"), "--plan",
                            checkpoint_test.make_plan(2)], command="reshard", nproc=2)
    disagreeing_options()
    finish("mpi shard")


if __name__ == "__main__":
    main()
