#!/usr/bin/env python3
"""Ranks started by torchrun, Open MPI's mpirun or Slurm's srun, without those launchers: this
test starts N real `shardkit shard` (and `shardkit demo`) processes itself, each with the variables
the launcher would set (RANK/WORLD_SIZE/LOCAL_RANK/TORCHELASTIC_RUN_ID, OMPI_COMM_WORLD_*,
SLURM_STEP_ID/SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) and a file (or tcp://) store in
SHARDKIT_STORE, over
real Gloo on 127.0.0.1. Their files must be byte-identical to `shardkit shard --nproc N`'s. Also:
a store reused by a second mpirun-style job, an outer launcher that disagrees (warning), a world
of one (`srun --pty bash`, where --nproc works), a Slurm batch script's environment, and the
errors (no store, --nproc under a launcher, malformed variables)."""

import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, check, finish, free_port, run, same_rank_files,
                                write_safetensors)

WORLD = 3
CK = os.path.join(TMP, "model.safetensors")
PLAN = os.path.join(TMP, "plan.json")


def write_inputs():
    tensors = {
        "rows": ("F32", [7, 4], bytes(range(112))),
        "cols": ("I16", [3, 5], bytes(range(30))),
        "norm": ("F32", [4], bytes(range(100, 116))),
    }
    write_safetensors(CK, tensors, metadata={"format": "pt"})
    with open(PLAN, "w") as f:
        f.write('{"rules": [{"match": "rows", "spec": {"type": "chunk", "dim": 0, "placements": '
                '{"ranks": "all"}}}, {"match": "cols", "spec": {"type": "chunk", "dim": 1, '
                '"placements": {"ranks": "all"}}}]}')


def base_env():
    """This test's environment without any launcher's variables."""
    launcher_vars = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID",
                     "TORCHELASTIC_RESTART_COUNT")
    return {k: v for k, v in os.environ.items()
            if not (k.startswith(("SHARDKIT_", "OMPI_", "SLURM_")) or k in launcher_vars)}


def torchrun_vars(rank, world, run_id="tr-1"):
    return {"TORCHELASTIC_RUN_ID": run_id, "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def ompi_vars(rank, world):
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank)}


def slurm_vars(rank, world, job="4242", step="0"):
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(rank)}


def start_ranks(args, rank_vars, store, world=WORLD, hostname="127.0.0.1"):
    """Starts `world` processes of `shardkit ARGS`, rank r with rank_vars(r) and SHARDKIT_STORE;
    returns their CompletedProcess-like results (returncode, stdout, stderr), in rank order."""
    procs = []
    for rank in range(world):
        env = dict(base_env(), **rank_vars(rank))
        if store is not None:
            env["SHARDKIT_STORE"] = store if "://" in store else "file://" + store
        if hostname is not None:
            env["SHARDKIT_HOSTNAME"] = hostname
        procs.append(subprocess.Popen([BIN] + args, env=env, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def shard_args(out):
    return ["shard", "--plan", PLAN, "--checkpoint", CK, "--out", out]


def same_output(out, reference, world, label):
    same_rank_files(out, reference, world, label)
    with open(os.path.join(out, "index.json")) as a, \
            open(os.path.join(reference, "index.json")) as b:
        check(a.read() == b.read(), f"{label}: index.json differs from {reference}'s")


def all_ok(results, label):
    for rank, r in enumerate(results):
        check(r.returncode == 0, f"{label}: rank {rank} exit {r.returncode}: {r.stderr}")
    return all(r.returncode == 0 for r in results)


def shard_under(label, rank_vars, reference, store, **kwargs):
    out = os.path.join(TMP, "out-" + label)
    results = start_ranks(shard_args(out), rank_vars, store, **kwargs)
    if all_ok(results, label):
        same_output(out, reference, WORLD, label)
    return results



def host_name_binds():
    """Whether this host's name resolves to an address a socket here can bind."""
    try:
        with socket.socket(socket.AF_INET) as s:
            s.bind((socket.gethostbyname(socket.gethostname()), 0))
        return True
    except OSError:
        return False


def each_launcher(reference):
    store = os.path.join(TMP, "store")
    shard_under("torchrun", lambda r: torchrun_vars(r, WORLD), reference, store)
    shard_under("ompi", lambda r: ompi_vars(r, WORLD), reference, store)
    # mpirun gives no run id: a second job on the same store agrees on a fresh one.
    shard_under("ompi-again", lambda r: ompi_vars(r, WORLD), reference, store)
    check(sorted(d for d in os.listdir(store) if d.startswith("job-w3-")) == ["job-w3-0", "job-w3-1"],
          f"two mpirun jobs: store namespaces {sorted(os.listdir(store))}")
    check(os.path.isdir(os.path.join(store, "tr-1")), "torchrun: no namespace tr-1 in the store")
    # A tcp:// store: rank 0's process serves it, no run id needed.
    shard_under("ompi-tcp", lambda r: ompi_vars(r, WORLD), reference, f"tcp://127.0.0.1:{free_port()}")
    if host_name_binds():  # Gloo binds what the host's name resolves to
        shard_under("slurm", lambda r: slurm_vars(r, WORLD), reference, store, hostname=None)
        check(os.path.isdir(os.path.join(store, "4242.0")), "srun: no namespace 4242.0")
    else:
        print("note: this host's name does not resolve to a bindable address; srun case with "
              "SHARDKIT_HOSTNAME=127.0.0.1")
        shard_under("slurm", lambda r: slurm_vars(r, WORLD), reference, store)


def outer_disagrees(reference):
    # torchrun's 3 ranks inside an srun step of 2 tasks: torchrun's values are used, with a warning.
    results = shard_under("nested", lambda r: dict(slurm_vars(r % 2, 2), **torchrun_vars(r, WORLD)),
                          reference, os.path.join(TMP, "store-nested"))
    for rank, r in enumerate(results):
        check(f"warning: using torchrun (RANK={rank}, WORLD_SIZE=3)" in r.stderr and
              f"Slurm srun (SLURM_PROCID={rank % 2}, SLURM_NTASKS=2)" in r.stderr,
              f"nested: rank {rank} stderr lacks the warning naming both: {r.stderr!r}")


def world_of_one():
    # `srun --pty bash`: a step of one task is no launcher, so --nproc starts local ranks.
    pty = dict(base_env(), **slurm_vars(0, 1))
    ref2 = os.path.join(TMP, "ref2")
    r = run(shard_args(ref2) + ["--nproc", "2"], env=base_env())
    check(r.returncode == 0, f"--nproc 2: exit {r.returncode}: {r.stderr}")
    out = os.path.join(TMP, "out-pty")
    r = run(shard_args(out) + ["--nproc", "2"], env=pty)
    if check(r.returncode == 0, f"srun --pty: --nproc 2: exit {r.returncode}: {r.stderr}"):
        same_output(out, ref2, 2, "srun --pty, --nproc 2")
    # A batch script's own environment (no step): a world of one, not a job of SLURM_NTASKS.
    batch = dict(base_env(), SLURM_JOB_ID="4242", SLURM_NTASKS="3", SLURM_PROCID="0")
    out = os.path.join(TMP, "out-batch")
    r = run(shard_args(out), env=batch)
    if check(r.returncode == 0, f"batch script env: exit {r.returncode}: {r.stderr}"):
        with open(os.path.join(out, "index.json")) as f:
            check('"world_size":1' in f.read().replace(" ", ""),
                  "batch script env: index.json is not a world of one")
        check(not os.path.exists(os.path.join(out, "rank-00001.safetensors")),
              "batch script env: more than one rank wrote")


def expect_error(label, r, text):
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(r.returncode == 2, f"{label}: exit {r.returncode}, expected 2: {r.stderr}")
    check(text in first, f"{label}: first stderr line {first!r} lacks {text!r}")


def errors():
    out = os.path.join(TMP, "out-err")
    expect_error("no store", run(shard_args(out), env=dict(base_env(), **torchrun_vars(1, 3))),
                 "torchrun (RANK=1, WORLD_SIZE=3) started this rank, and backend gloo needs a "
                 "rendezvous store every rank reaches: set SHARDKIT_STORE")
    for command in (shard_args(out), ["demo"]):
        expect_error(f"{command[0]} --nproc under mpirun",
                     run(command + ["--nproc", "2"], env=dict(base_env(), **ompi_vars(0, 3))),
                     "--nproc cannot be used under a launcher (Open MPI (OMPI_COMM_WORLD_RANK=0, "
                     "OMPI_COMM_WORLD_SIZE=3) detected)")
    bad = dict(base_env(), **slurm_vars(0, 3))
    bad["SLURM_PROCID"] = "zero"
    expect_error("malformed", run(shard_args(out), env=bad), 'SLURM_PROCID="zero" is not an integer')
    bad = dict(base_env(), **torchrun_vars(3, 3))
    expect_error("rank = world", run(shard_args(out), env=bad), "RANK=3 is outside 0..2")


def demo_under_torchrun():
    results = start_ranks(["demo"], lambda r: torchrun_vars(r, 2, run_id="demo-1"),
                          os.path.join(TMP, "store-demo"), world=2)
    if all_ok(results, "demo"):
        check("verified: all 53 parameters bit-exact" in results[0].stdout and "2 ranks" in
              results[0].stdout, f"demo: rank 0's summary: {results[0].stdout!r}")
        check(results[1].stdout == "", f"demo: rank 1 printed {results[1].stdout!r}")


def main():
    write_inputs()
    reference = os.path.join(TMP, "ref")
    r = run(shard_args(reference) + ["--nproc", str(WORLD)], env=base_env())
    if not check(r.returncode == 0, f"reference --nproc {WORLD}: exit {r.returncode}: {r.stderr}"):
        finish("launcher")
    each_launcher(reference)
    outer_disagrees(reference)
    world_of_one()
    errors()
    demo_under_torchrun()
    finish("launcher")


if __name__ == "__main__":
    main()
