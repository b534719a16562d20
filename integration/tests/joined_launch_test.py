#!/usr/bin/env python3
"""Two `shardkit launch` runs joined into one world of 4 (`--world 4 --rank-offset 0|2 --run-id
ws`), the README's weight-sync example, with the real binaries over a file:// store, a real
redis-server on 127.0.0.1 (skipped if not installed) and a tcp:// store served by rank 0's
launcher:
- the same two launches again, same store and run id, work (they used to fail with "control
  mesh ... Connection refused": the second job read the first one's keys);
- launches of ranks 0-2 and 2-3 (together every rank, rank 2 twice): the second launch fails with
  exit 2 naming rank 2 at once, whichever process of rank 2 comes second, and nothing waits out
  the timeout;
- launches whose --rank-offset ranges overlap fail at once, exit 2, every rank with the same
  first line naming the rank two processes claimed (they used to wait out the 60 s timeout and
  blame a rank that did not connect); the correct launches, same run id, work right after."""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, check, finish, first_lines_per_rank, free_port,  # noqa
                                ranks_named, skip)

EXAMPLE = os.path.join(os.environ.get("TEST_SRCDIR", "."),
                       "shardkit/integration/examples/weight_sync")
# Generous for a loaded 2-core machine; a rank claimed twice used to take the whole --timeout.
TIMEOUT_S = 60
FAIL_WITHIN_S = 15
PR_SET_PDEATHSIG = 1


def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def launch_pair(store, offsets, label, nprocs=(2, 2)):
    """Both launches (of 2 ranks each by default), the second a moment after the first, as the
    README's second command (the first job's keys must not stand in for its ranks then); (exit
    codes, stdout, stderr, seconds)."""
    start = time.monotonic()
    launchers = []
    for offset, nproc in zip(offsets, nprocs):
        if launchers:
            time.sleep(0.3)
        launchers.append(subprocess.Popen(
            [BIN, "launch", "--nproc", str(nproc), "--world", "4", "--rank-offset", str(offset),
             "--store", store, "--run-id", "ws", "--timeout", str(TIMEOUT_S), "--", EXAMPLE,
             "--trainer-ranks", "2", "--steps", "2", "--push-every", "1", "--mib", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent))
    codes, out, err = [], "", ""
    for launcher in launchers:
        stdout, stderr = launcher.communicate(timeout=TIMEOUT_S + 30)
        codes.append(launcher.returncode)
        out, err = out + stdout, err + stderr
    took = time.monotonic() - start
    print(f"{label}: exit {codes} in {took:.2f} s", flush=True)
    return codes, out, err, took


def joins(store, label):
    codes, out, err, _ = launch_pair(store, (0, 2), label)
    check(codes == [0, 0], f"{label}: exit {codes}:\n{out}{err}")
    check("[rank 2] push 2: 4 parameters, 1.00 MiB," in out and out.count("verified") == 2,
          f"{label}: pushes missing:\n{out}{err}")


def stopped_ranks(err):
    """Ranks a launcher stopped after --grace ("stopping rank(s) 2, 3: ...")."""
    stopped = set()
    for line in err.splitlines():
        m = re.match(r"shardkit launch: stopping rank\(s\) ([0-9, -]+):", line)
        stopped.update(ranks_named("ranks " + m.group(1)) or [] if m else [])
    return stopped


def overlap_fails(store, offsets, label, late_may_be_stopped=False):
    """Launches of ranks `offsets[0]`.. and `offsets[1]`..: every rank fails at once alike, both
    launchers exit 2. With `late_may_be_stopped` (a tcp:// store, which goes with the launcher of
    rank 0 once no rank is connected to it) a rank of the other launch that had not reached the
    store yet may instead be stopped by its launcher, --grace after its sibling failed."""
    codes, out, err, took = launch_pair(store, offsets, label)
    check(codes == [2, 2], f"{label}: exit {codes}, expected 2 from both:\n{err}")
    check(took < FAIL_WITHIN_S, f"{label}: took {took:.1f} s (--timeout {TIMEOUT_S})")
    ranks = {offset + i for offset in offsets for i in range(2)}
    duplicated = set(range(offsets[0], offsets[0] + 2)) & set(range(offsets[1], offsets[1] + 2))
    firsts = first_lines_per_rank(err, 4)
    stopped = stopped_ranks(err) if late_may_be_stopped else set()
    late = set(range(offsets[1], offsets[1] + 2)) - duplicated  # the other launch's own ranks
    check(set(firsts) | stopped == ranks and duplicated <= set(firsts) and stopped <= late,
          f"{label}: ranks with an error {sorted(firsts)}, stopped {sorted(stopped)}:\n{err}")
    lines = set(firsts.values())
    check(len(lines) == 1, f"{label}: the ranks' first lines differ: {lines}")
    line = next(iter(lines), "")
    check(any(f"weight_sync: rank {r} was claimed by two processes at the rendezvous of 4 ranks"
              in line for r in duplicated) and "--rank-offset ranges of two launches overlap"
          in line, f"{label}: first line: {line}")


def overlap_covering_the_world(store, label):
    """Ranks 0-2 and 2-3: together every rank, rank 2 twice. Whichever process of rank 2 claims
    second — before the world is complete (every rank fails alike, exit 2) or after (the job of
    the others joined and may even finish; the late one fails at once) — the duplicate is named
    at once, the second launch fails, and nothing waits out its timeout."""
    codes, _, err, took = launch_pair(store, (0, 2), label, nprocs=(3, 2))
    check(codes[1] == 2, f"{label}: exit {codes}, expected 2 from the second launch:\n{err}")
    check(took < FAIL_WITHIN_S + 5, f"{label}: took {took:.1f} s (--timeout {TIMEOUT_S})")
    check("rank 2 was claimed by two processes at the rendezvous of 4 ranks" in err,
          f"{label}: the duplicate is not named:\n{err}")


def start_redis():
    """A redis-server on a free loopback port, killed with this test: (process, URL), or None."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    port = free_port()
    server = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", TMP], stdout=subprocess.DEVNULL,
                              preexec_fn=die_with_parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"redis://127.0.0.1:{port}/joined"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not come up")


def main():
    stores = {"file": "file://" + os.path.join(TMP, "store")}
    redis = start_redis()
    if redis:
        stores["redis"] = redis[1]
    else:
        skip("redis", "redis-server is not installed")
    try:
        check_stores(stores)
    finally:
        if redis:
            redis[0].kill()
            redis[0].wait()
    finish("joined launches")


def check_stores(stores):
    for name, store in stores.items():
        joins(store, f"{name}: first job")
        joins(store, f"{name}: second job, same run id")
        overlap_fails(store, (0, 0), f"{name}: both --rank-offset 0")
        joins(store, f"{name}: after the overlap, same run id")
        overlap_covering_the_world(store, f"{name}: ranks 0-2 and 2-3")
        joins(store, f"{name}: after the covering overlap, same run id")
    # tcp://: rank 0's launcher serves the store for its run only, so a second job meets a fresh
    # one; ranks 0-1 and 1-2 overlap through it (two launchers at offset 0 cannot both serve).
    tcp = f"tcp://127.0.0.1:{free_port()}"
    joins(tcp, "tcp: first job")
    joins(tcp, "tcp: second job, same port and run id")
    overlap_fails(tcp, (0, 1), "tcp: --rank-offset 0 and 1", late_may_be_stopped=True)


if __name__ == "__main__":
    main()
