#!/usr/bin/env python3
"""A deadline that passes with MPI messages pending ends the whole MPI job: `mpirun -np 3` of
mpi_abort_ranks, where rank 0 waits in a Barrier with a 2 s deadline for rank 2, which never
enters it (and, as a second job, ranks waiting for rank 2 to connect). Checks that mpirun returns within the deadline (plus the time to stop the job), with
exit code 1 (MPI_Abort's code), that rank 0's stderr names the missing peer, and, with each rank
started under a small wrapper that records how it ended, each rank's exit: rank 0 exits 1, the
others are killed by SIGTERM."""

import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit/backends/mpi/mpi_abort_ranks")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
MPIRUN = ["mpirun", "-np", "3", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
DEADLINE_S = 2.0
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message, flush=True)


def rank_wrapper(rc_dir, command):
    """Runs one rank's command, then writes how it ended to rc_dir/rank-R (a signal as -S). The
    wrapper ignores SIGTERM (its child does not) so that it outlives the child long enough."""
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = child.wait()
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "unknown")
    with open(os.path.join(rc_dir, f"rank-{rank}"), "w") as f:
        f.write(f"{code}\n")
    return code if code >= 0 else 128 - code


def run(command, mca=()):
    start = time.monotonic()
    env = dict(os.environ, TMPDIR=TMP)  # Open MPI's session directory: this test's own
    result = subprocess.run(MPIRUN + list(mca) + command, capture_output=True, text=True,
                            timeout=120, env=env)
    return result, time.monotonic() - start


def connect_deadline():
    """Ranks 0 and 1 wait in the communicator's creation for rank 2, which never connects: the
    watchdog aborts the job at the creation's deadline."""
    result, elapsed = run([RANKS, str(DEADLINE_S), "connect"])
    print(f"connect: mpirun exited {result.returncode} after {elapsed:.2f} s")
    check(result.returncode == 1, f"connect: mpirun exited {result.returncode}, expected 1")
    check(elapsed < DEADLINE_S + 10, f"connect: the job took {elapsed:.2f} s to end")
    lines = [line for line in result.stderr.splitlines() if line.startswith("shardkit: ")]
    check(len(lines) >= 1 and all(
        "DEADLINE_EXCEEDED: creating the MPI communicator (world rank" in line and
        "aborting the MPI job (MPI_Abort, exit code 1)" in line for line in lines),
        f"connect: the watchdog's message: {result.stderr}")
    check("Connect returned" not in result.stderr, "connect: no rank returned from Connect")


def main():
    # The job as users run it.
    result, elapsed = run([RANKS, str(DEADLINE_S), "barrier"])
    print(f"mpirun exited {result.returncode} after {elapsed:.2f} s; stderr:\n{result.stderr}")
    check(result.returncode == 1, f"mpirun exited {result.returncode}, expected 1")
    check(elapsed < DEADLINE_S + 10, f"the job took {elapsed:.2f} s to end (deadline {DEADLINE_S} s)")
    lines = result.stderr.splitlines()
    abort = [line for line in lines if line.startswith("shardkit: DEADLINE_EXCEEDED")]
    check(len(abort) == 1, "one line from rank 0 saying it aborts the job")
    for line in abort:
        for part in ["rank=0/3", "not heard from rank 2", "aborting the MPI job (MPI_Abort, exit code 1)"]:
            check(part in line, f"rank 0's message names {part!r}: {line}")
    check(not any("Barrier returned" in line for line in lines), "no rank returned from the Barrier")

    # The same job, each rank under a wrapper that records how it ended.
    rc_dir = os.path.join(TMP, "rc")
    os.makedirs(rc_dir, exist_ok=True)
    # Open MPI sends each rank's process group SIGTERM, then SIGKILL after 1 s: on a loaded
    # machine that can come before a wrapper has written down how its rank ended. 3 s for them
    # (mpirun then waits about twice that before it exits).
    result, elapsed = run([sys.executable, os.path.abspath(__file__), "--rank-wrapper", rc_dir,
                           RANKS, str(DEADLINE_S), "barrier"], mca=["--mca", "odls_base_sigkill_timeout", "3"])
    print(f"wrapped: mpirun exited {result.returncode} after {elapsed:.2f} s")
    check(result.returncode == 1, f"wrapped: mpirun exited {result.returncode}, expected 1")
    codes = {}
    for rank in range(3):
        path = os.path.join(rc_dir, f"rank-{rank}")
        codes[rank] = int(open(path).read()) if os.path.exists(path) else None
    print(f"rank exit codes (negative: killed by that signal): {codes}")
    check(codes[0] == 1, f"rank 0 (MPI_Abort) exited {codes[0]}, expected 1")
    for rank in (1, 2):
        check(codes[rank] == -signal.SIGTERM, f"rank {rank} ended with {codes[rank]}, "
              f"expected to be killed by SIGTERM ({-signal.SIGTERM})")
    connect_deadline()
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all abort checks passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rank-wrapper":
        sys.exit(rank_wrapper(sys.argv[2], sys.argv[3:]))
    sys.exit(main())
