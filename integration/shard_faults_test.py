#!/usr/bin/env python3
"""`shardkit shard` of a 64 MiB checkpoint on 3 ranks with one rank SIGKILLed before, during and
after the transfer. The kill is placed by bytes, not by timing: the source dies once it has read
32 MiB of the checkpoint (before), or sent 8 MiB of shards (during); rank 1 dies once it has
written 2 MiB of its shard file (after). Every other rank exits 1 within the run's deadline + 2 s,
no index.json is left, and no rank process outlives the launcher."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import BIN, TMP, check, finish, write_safetensors

MIB = 1 << 20
WORLD = 3
TIMEOUT = 8  # seconds: the deadline of each rank's whole run
CK = os.path.join(TMP, "big.safetensors")
PLAN = os.path.join(TMP, "plan.json")


def io_counter(pid, field):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                key, value = line.split(":")
                if key == field:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_case(label, victim, field, threshold):
    out = os.path.join(TMP, label)
    pids = os.path.join(TMP, label + ".pids")
    os.makedirs(pids)
    script = (f'echo $$ > "{pids}/$SHARDKIT_RANK"; '
              f'exec "{BIN}" shard --plan "{PLAN}" --checkpoint "{CK}" --out "{out}"')
    start = time.time()
    launcher = subprocess.Popen(
        [BIN, "launch", "--nproc", str(WORLD), "--timeout", str(TIMEOUT), "--grace", "30", "--",
         "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim_file = os.path.join(pids, str(victim))
    while not os.path.exists(victim_file) and time.time() - start < 20:
        time.sleep(0.001)
    time.sleep(0.01)  # `echo` done
    with open(victim_file) as f:
        pid = int(f.read())
    base = None
    killed_at = None
    while time.time() - start < 20 and launcher.poll() is None:
        value = io_counter(pid, field)
        if value is not None and base is None:
            base = value
        if value is not None and value - base >= threshold:
            os.kill(pid, signal.SIGKILL)
            killed_at = time.time()
            break
        time.sleep(0.0005)
    _, stderr = launcher.communicate(timeout=60)
    if not check(killed_at is not None, f"{label}: rank {victim} never reached {threshold} bytes "
                 f"of {field}: {stderr}"):
        return
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
    check(not os.path.exists(os.path.join(out, "index.json")), f"{label}: index.json written")
    for rank in range(WORLD):
        with open(os.path.join(pids, str(rank))) as f:
            rank_pid = int(f.read())
        check(not alive(rank_pid), f"{label}: rank {rank} (pid {rank_pid}) outlived the launcher")


def main():
    # 64 MiB float32 "w" [4096, 4096], rows over the 3 ranks; a small replicated "b".
    blob = bytes(range(256)) * (64 * MIB // 256)
    write_safetensors(CK, {"w": ("F32", [4096, 4096], blob), "b": ("F32", [4], b"\1" * 16)})
    with open(PLAN, "w") as f:
        f.write('{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0, '
                '"placements": {"ranks": "all"}}}]}')
    run_case("kill-before", 0, "rchar", 32 * MIB)   # the source, reading the checkpoint
    run_case("kill-during", 0, "wchar", 8 * MIB)    # the source, sending 2/3 of 64 MiB
    run_case("kill-after", 1, "wchar", 2 * MIB)     # rank 1, writing its ~21 MiB shard file
    finish("shard fault")


if __name__ == "__main__":
    main()
