#!/usr/bin/env python3
"""Progress lines reach a person watching through `shardkit launch`: the ranks' stderr is a pipe
to the launcher, so the launcher sets SHARDKIT_PROGRESS=1 for them when its own stderr is a
terminal (a real pseudo-terminal here), and leaves it alone otherwise or when it is already set.
(The progress lines themselves, bytes, rate and ETA, are checked by
//integration/checkpoint:progress_test: a real run would have to last over a second.)"""

import os
import pty
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import BIN, check, finish


def launch_env(stderr_is_tty, env_value=None):
    """What each of 2 ranks sees as SHARDKIT_PROGRESS, as '[rank R] p=...' lines."""
    env = dict(os.environ)
    env.pop("SHARDKIT_PROGRESS", None)
    if env_value is not None:
        env["SHARDKIT_PROGRESS"] = env_value
    primary, secondary = pty.openpty() if stderr_is_tty else (None, None)
    try:
        done = subprocess.run(
            [BIN, "launch", "--nproc", "2", "--", "sh", "-c", 'echo "p=${SHARDKIT_PROGRESS-unset}"'],
            stdout=subprocess.PIPE, stderr=secondary if stderr_is_tty else subprocess.PIPE,
            env=env, text=True, timeout=60)
    finally:
        for fd in (primary, secondary):
            if fd is not None:
                os.close(fd)
    return sorted(done.stdout.splitlines())


def main():
    check(launch_env(True) == ["[rank 0] p=1", "[rank 1] p=1"],
          f"terminal: {launch_env(True)}")
    check(launch_env(False) == ["[rank 0] p=unset", "[rank 1] p=unset"],
          f"pipe: {launch_env(False)}")
    check(launch_env(True, "0") == ["[rank 0] p=0", "[rank 1] p=0"],
          f"terminal, SHARDKIT_PROGRESS=0 kept: {launch_env(True, '0')}")

    finish("progress")


if __name__ == "__main__":
    main()
