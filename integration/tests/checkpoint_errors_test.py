#!/usr/bin/env python3
"""Bad input for `shardkit shard/gather/inspect` (the real binary): exit 2 with the error as the
first stderr line; ranks that disagree or lose a peer all fail; a failed run leaves no index.json;
an output directory another run holds (its .shardkit.lock locked) is refused."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, check, finish, first_lines_per_rank, run,  # noqa: E402
                                tmp_path, write_json, write_safetensors)


def expect(label, r, code, text):
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(r.returncode == code, f"{label}: exit {r.returncode}, expected {code}: {r.stderr}")
    check(text in first, f"{label}: first stderr line {first!r} lacks {text!r}")
    check(r.stdout == "", f"{label}: stdout {r.stdout!r}")


CK = tmp_path("model.safetensors")
PLAN = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]}


def shard_args(plan, ck=CK, out=None):
    return ["shard", "--plan", plan, "--checkpoint", ck, "--out", out or tmp_path("out")]


def bad_checkpoints(plan):
    with open(CK, "rb") as f:
        good = f.read()
    for label, blob, text in (
            ("malformed header", (9).to_bytes(8, "little") + b"{not json", "not valid JSON"),
            ("truncated", good[:-3], "truncated"),
            ("short", b"\x01\x02", "not a safetensors file")):
        with open(tmp_path("bad.safetensors"), "wb") as f:
            f.write(blob)
        expect(label, run(shard_args(plan, tmp_path("bad.safetensors"))), 2, text)
    with open(tmp_path("f4.safetensors"), "wb") as f:  # 3 four-bit elements: not whole bytes
        header = b'{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}'
        f.write(len(header).to_bytes(8, "little") + header + b"\0\0")
    expect("F4 odd bits", run(shard_args(plan, tmp_path("f4.safetensors"))), 2,
           "12 bits, not a whole number of bytes")
    expect("missing checkpoint", run(shard_args(plan, tmp_path("nope.safetensors"))), 2,
           "no such file")
    # Only the source reads the checkpoint; the other ranks fail with the same message.
    with open(tmp_path("bad.safetensors"), "wb") as f:
        f.write((9).to_bytes(8, "little") + b"{not json")
    r = run(shard_args(plan, tmp_path("bad.safetensors")) + ["--nproc", "2"])
    firsts = first_lines_per_rank(r.stderr, 2)
    check(r.returncode == 2 and len(set(firsts.values())) == 1 and len(firsts) == 2 and
          "not valid JSON" in firsts[1], f"bad checkpoint on 2 ranks: {r.returncode} {r.stderr}")


def bad_plans_and_flags(plan):
    bad = write_json("bad_plan.json", {"rules": [{"match": "w", "spec": {
        "type": "chunk", "dim": "x", "placements": ["rank:0"]}}]})
    expect("invalid plan", run(shard_args(bad)), 2, 'rules[0].spec.dim: expected integer, got "x"')
    dim = write_json("dim_plan.json", {"rules": [{"match": "w", "spec": {
        "type": "chunk", "dim": 3, "placements": ["rank:0"]}}]})
    expect("dim out of range", run(shard_args(dim)), 2, 'parameter "w"')
    expect("missing plan", run(shard_args(tmp_path("none.json"))), 2, "no such file")
    expect("--src-rank outside", run(shard_args(plan) + ["--src-rank", "2", "--nproc", "2"]), 2,
           "src_rank 2 is outside the world of 2 ranks")
    far = write_json("far_plan.json", dict(PLAN, src_rank=1))
    expect("plan src_rank outside", run(shard_args(far)), 2, "src_rank 1 is outside the world")
    expect("missing --plan", run(["shard", "--checkpoint", CK, "--out", tmp_path("o")]), 2, "--plan")
    expect("bad strategy", run(shard_args(plan) + ["--strategy", "gossip"]), 2, "gossip")
    expect("--nproc under a launcher",
           run(shard_args(plan) + ["--nproc", "2"], env=dict(os.environ, SHARDKIT_RANK="0")), 2,
           "--nproc cannot be used under a launcher")
    r = run(["shard", "--help"])
    check(r.returncode == 0 and "--checkpoint" in r.stdout, "shard --help")


def bad_output_dirs(plan):
    with open(tmp_path("regular"), "w") as f:
        f.write("x")
    expect("out below a file", run(shard_args(plan, out=tmp_path("regular/out"))), 2,
           "Not a directory")
    os.makedirs(tmp_path("foreign"), exist_ok=True)
    with open(tmp_path("foreign/notes.txt"), "w") as f:
        f.write("keep me")
    expect("foreign files", run(shard_args(plan, out=tmp_path("foreign"))), 2, "not shardkit output")
    check(os.listdir(tmp_path("foreign")) == ["notes.txt"], "foreign dir was modified")
    write_safetensors(tmp_path("hash.safetensors"), {"a#1": ("F32", [1], b"\0" * 4)})
    r = run(shard_args(plan, tmp_path("hash.safetensors"), tmp_path("hash-out")) + ["--nproc", "2"])
    firsts = first_lines_per_rank(r.stderr, 2)
    check(r.returncode == 2 and len(firsts) == 2 and len(set(firsts.values())) == 1 and
          "must not contain '#'" in firsts[0], f"'#' in a name: {r.returncode} {r.stderr}")
    check(not os.path.exists(tmp_path("hash-out/index.json")), "'#' run left index.json")


def locked_output_dir(plan):
    out = tmp_path("locked-out")
    lock_path = os.path.join(out, ".shardkit.lock")
    args = shard_args(plan, out=out) + ["--nproc", "3"]
    os.makedirs(out)
    with open(lock_path, "w") as lock:  # this process is the other run: a real flock(2)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = run(args)
        firsts = first_lines_per_rank(r.stderr, 3)
        check(r.returncode == 2, f"locked dir: exit {r.returncode}: {r.stderr}")
        check(len(firsts) == 3 and all(".shardkit.lock" in line and
                                       "another shardkit run is writing this directory" in line
                                       for line in firsts.values()),
              f"locked dir: not every rank names the lock: {r.stderr}")
        check(os.listdir(out) == [".shardkit.lock"], f"locked dir was written: {os.listdir(out)}")
    r = run(args)  # released when the file was closed; the file, left behind, is taken over
    check(r.returncode == 0, f"after the lock was released: exit {r.returncode}: {r.stderr}")
    check(not os.path.exists(lock_path), "the lock file was left behind by the run that held it")
    gathered = tmp_path("locked-gathered.safetensors")
    r = run(["gather", "--in", out, "--out", gathered])
    check(r.returncode == 0, f"gather of the once-locked dir: {r.stderr}")
    if r.returncode == 0:
        with open(CK, "rb") as a, open(gathered, "rb") as b:
            check(a.read() == b.read(), "gather of the once-locked dir differs from the original")
    r = run(args)  # into the finished directory
    check(r.returncode == 0, f"second run into a finished dir: exit {r.returncode}: {r.stderr}")
    check(sorted(os.listdir(out)) == ["index.json"] +
          [f"rank-0000{rank}.safetensors" for rank in range(3)],
          f"second run left {sorted(os.listdir(out))}")


def launch_wrapper(rank1_plan, plan, out, extra="", rank1_flags=""):
    script = (f'f=""; if [ "$SHARDKIT_RANK" = 1 ]; then p="{rank1_plan}"; f="{rank1_flags}"; {extra} '
              f'else p="{plan}"; fi; '
              f'exec "{BIN}" shard --plan "$p" --checkpoint "{CK}" --out "{out}" $f')
    return ["launch", "--nproc", "3", "--timeout", "5", "--grace", "30", "--", "sh", "-c", script]


def disagreeing_plans(plan):
    other = write_json("other.json", {"rules": [{"match": "w", "spec": {
        "type": "chunk", "dim": 0, "placements": ["rank:2", "rank:1", "rank:0"]}}]})
    invalid = write_json("invalid.json", "{\"rules\": [")
    budgets = "different memory budgets (--memory-mib): rank 1: 8 MiB; ranks 0, 2: 512 MiB"
    for label, rank1_plan, flags, text in (
            ("disagreeing plans", other, "", "rank 1"),
            ("invalid plan on one rank", invalid, "", "invalid JSON"),
            ("disagreeing memory budgets", plan, "--memory-mib 8", budgets)):
        out = tmp_path(label.replace(" ", "-"))
        r = run(launch_wrapper(rank1_plan, plan, out, rank1_flags=flags))
        firsts = first_lines_per_rank(r.stderr, 3)
        check(r.returncode == 2, f"{label}: launcher exit {r.returncode}: {r.stderr}")
        check(len(firsts) == 3 and len(set(firsts.values())) == 1 and text in firsts[0],
              f"{label}: ranks differ or lack {text!r}: {firsts}")
        for rank in range(3):
            check(f"rank {rank} exited with code 2" in r.stderr, f"{label}: rank {rank}: {r.stderr}")
        check(not os.path.exists(os.path.join(out, "index.json")), f"{label}: index.json written")


def killed_rank(plan):
    fifo, pidfile, out = tmp_path("never.json"), tmp_path("rank1.pid"), tmp_path("killed-out")
    os.mkfifo(fifo)  # rank 1 blocks opening its plan, after joining the rendezvous
    launcher = subprocess.Popen([BIN] + launch_wrapper(fifo, plan, out, f'echo $$ > "{pidfile}";'),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not os.path.exists(pidfile) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    with open(pidfile) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    killed_at = time.time()
    _, stderr = launcher.communicate(timeout=40)
    check(time.time() - killed_at < 20, f"killed rank: others took {time.time() - killed_at:.1f} s")
    check(launcher.returncode == 1, f"killed rank: launcher exit {launcher.returncode}: {stderr}")
    check("rank 1 killed by signal 9" in stderr, f"killed rank: report: {stderr}")
    for rank in (0, 2):
        check(f"rank {rank} exited with code 1" in stderr, f"killed rank: rank {rank}: {stderr}")
    check(not os.path.exists(os.path.join(out, "index.json")), "killed rank: index.json written")


def bad_gather_and_inspect(plan):
    out = tmp_path("good-out")
    r = run(shard_args(plan, out=out) + ["--nproc", "2"])
    check(r.returncode == 0, f"good run: {r.stderr}")
    expect("gather without index",
           run(["gather", "--in", tmp_path("foreign"), "--out", tmp_path("g")]), 2,
           "index.json: no such file")
    expect("gather to a bad path", run(["gather", "--in", out, "--out", tmp_path("regular/g")]), 2,
           "Not a directory")
    with open(os.path.join(out, "index.json")) as f:
        index = f.read()
    write_json("good-out/index.json", index.replace('"sizes":[2]', '"sizes":[3]', 1))
    expect("tampered index", run(["gather", "--in", out, "--out", tmp_path("g")]), 2,
           'parameters["w"].shards')
    write_json("good-out/index.json", index)
    write_safetensors(os.path.join(out, "rank-00001.safetensors"), {"w": ("F32", [3], b"\0" * 12)})
    expect("wrong shard shape", run(["gather", "--in", out, "--out", tmp_path("g")]), 2, "F32[3]")
    write_safetensors(os.path.join(out, "rank-00001.safetensors"),
                      {"w": ("F32", [2], b"\0" * 8), "extra": ("I8", [1], b"\0")})
    expect("unlisted tensor", run(["gather", "--in", out, "--out", tmp_path("g")]), 2, "not listed")
    os.remove(os.path.join(out, "rank-00001.safetensors"))
    expect("missing rank file", run(["gather", "--in", out, "--out", tmp_path("g")]), 2,
           "no such file")
    check(not os.path.exists(tmp_path("g")), "failed gathers left an output file")
    expect("inspect missing", run(["inspect", tmp_path("nothing")]), 2, "no such file")
    expect("inspect malformed", run(["inspect", tmp_path("bad.safetensors")]), 2, "not valid JSON")
    expect("inspect two paths", run(["inspect", CK, CK]), 2, "exactly one PATH")


def main():
    write_safetensors(CK, {"w": ("F32", [4], bytes(range(16)))})
    plan = write_json("plan.json", PLAN)
    bad_checkpoints(plan)
    bad_plans_and_flags(plan)
    bad_output_dirs(plan)
    locked_output_dir(plan)
    disagreeing_plans(plan)
    killed_rank(plan)
    bad_gather_and_inspect(plan)
    finish("checkpoint error")


if __name__ == "__main__":
    main()
