#!/usr/bin/env python3
"""`shardkit shard` of a 64 MiB checkpoint on 3 ranks with one rank SIGKILLed before, during and
after the transfer. The kill is placed by bytes, not by timing: the source dies once it has read
32 MiB of the checkpoint (before), or sent 8 MiB of shards (during); rank 1 dies once it has
created its shard file and is writing it (after). Under an 8 MiB budget (streaming in rounds) the
source dies after sending 24 MiB, and rank 1 after writing 6 MiB into its file, over an earlier
complete output; under `--strategy direct` rank 1 dies after reading 8 MiB of its shards itself.
A kill that lands too late on a loaded machine (the victim already done) is tried
again. Every other rank exits 1 within the run's deadline + 2 s, no new index.json is written —
an earlier output stays whole (it gathers) and nothing is left beside it — and no rank process
outlives the launcher."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, alive, check, finish, io_grew, launch_recording_pids,
                                new_dirs_beside, read_pid, write_big_checkpoint, writing_file)

MIB = 1 << 20
WORLD = 3
TIMEOUT = 8  # seconds: the deadline of each rank's whole run
CK = os.path.join(TMP, "big.safetensors")
PLAN = os.path.join(TMP, "plan.json")


def mid_write(threshold):
    """A kill condition: the victim's shard file exists and it has written `threshold` bytes into
    it (a receiver writes nothing else: its wchar is its file's pwrites)."""
    grew = io_grew("wchar", threshold)

    def reached(pid, out):
        return writing_file(pid, out) and grew(pid, out)
    return reached


def earlier_output(out):
    """A complete earlier output in `out`, as a previous run leaves it."""
    done = subprocess.run([BIN, "shard", "--nproc", str(WORLD), "--plan", PLAN, "--checkpoint",
                           CK, "--out", out], capture_output=True, text=True)
    check(done.returncode == 0, f"earlier output: {done.stderr}")


def run_case(label, victim, reached, attempt=1, extra="", earlier=False):
    """Returns False if the kill landed too late to test anything (the victim had finished)."""
    out = os.path.join(TMP, f"{label}-{attempt}")
    pids = os.path.join(TMP, f"{label}-{attempt}.pids")
    if earlier:
        earlier_output(out)
    start = time.time()
    launcher = launch_recording_pids(
        pids, f'shard --plan "{PLAN}" --checkpoint "{CK}" --out "{out}" {extra}', nproc=WORLD,
        launch_flags=("--timeout", str(TIMEOUT), "--grace", "30"))
    pid = read_pid(os.path.join(pids, str(victim)), start + 20)
    killed_at = None
    while time.time() - start < 20 and launcher.poll() is None:
        if reached(pid, out):
            os.kill(pid, signal.SIGKILL)
            killed_at = time.time()
            break
        time.sleep(0.0005)
    _, stderr = launcher.communicate(timeout=60)
    if killed_at is not None and not earlier and os.path.exists(
            os.path.join(out, f"rank-{victim:05d}.safetensors")):
        print(f"{label}: the kill landed after rank {victim} had written its file (a slow "
              "machine); trying again", flush=True)
        return False
    if not check(killed_at is not None, f"{label}: rank {victim} was never killed: {stderr}"):
        return True
    took = time.time() - killed_at
    print(f"{label}: rank {victim} killed {killed_at - start:.3f} s into the run; the others "
          f"failed {took:.3f} s later (deadline {TIMEOUT} s)", flush=True)
    check(took < TIMEOUT + 2, f"{label}: the others took {took:.1f} s")
    # The launcher exits with the code of the lowest-numbered failed rank (128 + 9 if killed).
    expected = 128 + signal.SIGKILL if victim == 0 else 1
    check(launcher.returncode == expected, f"{label}: launcher exit {launcher.returncode}: {stderr}")
    check(f"rank {victim} killed by signal 9" in stderr, f"{label}: report: {stderr}")
    for rank in range(WORLD):
        if rank != victim:
            check(f"rank {rank} exited with code 1" in stderr, f"{label}: rank {rank}: {stderr}")
    if earlier:
        # The earlier output is still there, whole: it gathers; the survivors removed the new
        # one's directory beside it.
        check(os.path.exists(os.path.join(out, "index.json")), f"{label}: earlier index.json gone")
        kept = subprocess.run([BIN, "gather", "--in", out, "--out", out + ".safetensors"],
                              capture_output=True, text=True)
        check(kept.returncode == 0, f"{label}: the earlier output does not gather: {kept.stderr}")
        check(new_dirs_beside(out) == [], f"{label}: left beside it: {new_dirs_beside(out)}")
    else:
        check(not os.path.exists(os.path.join(out, "index.json")), f"{label}: index.json written")
    for rank in range(WORLD):
        rank_pid = read_pid(os.path.join(pids, str(rank)), time.time() + 5)
        check(not alive(rank_pid), f"{label}: rank {rank} (pid {rank_pid}) outlived the launcher")
    return True


def run_case_landed(label, victim, reached, **kwargs):
    """run_case, again (3 tries at most) while the kill lands too late on a loaded machine."""
    for attempt in range(1, 4):
        if run_case(label, victim, reached, attempt, **kwargs):
            return
    check(False, f"{label}: the kill never landed in time in 3 tries")


def main():
    # 64 MiB float32 "w" [4096, 4096], rows over the 3 ranks; a small replicated "b".
    write_big_checkpoint(CK, PLAN, dim=0)
    # The source, reading the checkpoint; then sending 2/3 of 64 MiB; rank 1, writing its file.
    run_case_landed("kill-before", 0, io_grew("rchar", 32 * MIB))
    run_case_landed("kill-during", 0, io_grew("wchar", 8 * MIB))
    run_case_landed("kill-after", 1, writing_file)
    # Streaming in rounds (8 MiB budget: about 18 rounds): the source in the middle of the rounds;
    # rank 1 in the middle of writing its file, over an earlier complete output (which must stay
    # whole: the new one is written beside it).
    stream = "--memory-mib 8"
    run_case_landed("stream-kill-source", 0, io_grew("wchar", 24 * MIB), extra=stream)
    run_case_landed("stream-kill-writer", 1, mid_write(6 * MIB), extra=stream, earlier=True)
    # Every rank reading its own shards (about 21 MiB each): rank 1 in the middle of its reads.
    run_case_landed("direct-kill-reader", 1, io_grew("rchar", 8 * MIB),
                    extra=stream + " --strategy direct")
    finish("shard fault")


if __name__ == "__main__":
    main()
