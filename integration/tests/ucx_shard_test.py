#!/usr/bin/env python3
"""`shardkit shard --backend ucx` (the plugin libshardkit_backend_ucx.so, found on
SHARDKIT_PLUGIN_PATH) writes the same shard directory as with Gloo: byte-identical rank files,
equivalent index.json — for checkpoint_test's checkpoint (every byte-sized dtype, zero-size
shards) with scatter and broadcast, a 6 MiB tensor streamed under a 1 MiB memory budget (several
rounds), and `reshard` of the UCX output onto 2 ranks. `shardkit --version` lists the plugin with
the transports UCX finds; a UCX_TLS asking for a transport this host lacks is exit 1 naming what
was found, from `--version` and from `shard` alike."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_test  # noqa: E402  (its checkpoint and plan)
from checkpoint_testlib import (TMP, check, finish, run, same_directories,  # noqa: E402
                                write_safetensors)
from mpi_shard_test import big_checkpoint  # noqa: E402

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit")
ENV = dict(os.environ, SHARDKIT_PLUGIN_PATH=os.path.join(RUNFILES, "backends/ucx"))
ENV.pop("UCX_TLS", None)


def same_output(label, args, command="shard", nproc=3):
    """Runs `command` on Gloo and on UCX (--nproc both); compares the two directories."""
    outs = {b: os.path.join(TMP, f"{label}-{b}") for b in ("gloo", "ucx")}
    for backend, out in outs.items():
        r = run([command] + args + ["--out", out, "--nproc", str(nproc), "--backend", backend],
                env=ENV)
        if not check(r.returncode == 0, f"{label}: {backend} {command} exit {r.returncode}: "
                     f"{r.stderr}"):
            return
    if same_directories(outs["ucx"], outs["gloo"], nproc, label):
        print(f"{label}: same files from ucx and gloo on {nproc} ranks")


def version():
    r = run(["--version"], env=ENV)
    check(r.returncode == 0, f"--version exit {r.returncode}: {r.stderr}")
    line = [x for x in r.stdout.splitlines() if x.startswith("ucx: ")]
    check(len(line) == 1 and re.fullmatch(
        r"ucx: plugin \S+/libshardkit_backend_ucx\.so \(transports: self, tcp(, \w+)*\)", line[0]),
        f"--version's ucx line: {line}")
    print(line[0])


def missing_transport(ck, plan):
    env = dict(ENV, UCX_TLS="rc,tcp")
    r = run(["--version"], env=env)
    check(r.returncode == 1, f"UCX_TLS=rc,tcp: --version exit {r.returncode}, expected 1")
    check(re.search(r"^ucx: plugin \S+: not usable: UCX_TLS asks for rc, which this host lacks "
                    r"\(found: self, tcp", r.stdout, re.M) is not None,
          f"UCX_TLS=rc,tcp: --version says: {r.stdout}")
    r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", os.path.join(TMP, "no-rc"),
             "--nproc", "2", "--backend", "ucx"], env=env)
    check(r.returncode == 1, f"UCX_TLS=rc,tcp: shard exit {r.returncode}, expected 1: {r.stderr}")
    check("UCX_TLS asks for rc, which this host lacks (found: self, tcp" in r.stderr,
          f"UCX_TLS=rc,tcp: shard says: {r.stderr}")


def main():
    ck = os.path.join(TMP, "model.safetensors")
    write_safetensors(ck, checkpoint_test.make_checkpoint(), checkpoint_test.METADATA)
    plan = checkpoint_test.make_plan(3)
    version()
    same_output("scatter", ["--plan", plan, "--checkpoint", ck])
    same_output("broadcast", ["--plan", plan, "--checkpoint", ck, "--strategy", "broadcast"])
    big, big_plan = big_checkpoint()
    same_output("big", ["--plan", big_plan, "--checkpoint", big, "--memory-mib", "1"])
    # The UCX run's shard directory laid out anew on 2 ranks (reshard: range reads, AllToAll).
    same_output("reshard", ["--in", os.path.join(TMP, "scatter-ucx"), "--plan",
                            checkpoint_test.make_plan(2)], command="reshard", nproc=2)
    missing_transport(ck, checkpoint_test.make_plan(2))
    finish("ucx shard")


if __name__ == "__main__":
    main()
