#!/usr/bin/env python3
"""`shardkit reshard --in DIR --plan PLAN --out DIR2`: a shard directory laid out anew, every rank
reading its new shards from the old rank files itself.

- Every safetensors dtype (F4 and F6 included) across world sizes 4->3, 3->4, 1->4, 4->1, each
  parameter changing dim (0 <-> 1), kind (enumerable -> chunk) or replication (replicated <->
  sharded): the rank files are byte-identical to `shard`'s for the new plan and world, `gather` of
  the output gives back the original checkpoint byte for byte, index.json says "reshard", src_rank
  0; a plan's src_rank is ignored with a warning.
- Refusals, exit 2 on every rank with the same first line: --out inside --in; --in not a shard
  directory; a rank that cannot read DIR (its copy missing); a rank whose copy's index.json
  differs; an old rank file replaced after the agreement (rank 1 stopped once it has created its
  new file). A rank killed mid-read: the others exit 1, no index.json.
- Bytes pread: every rank's summary bytes_read is at most 1.25 x the bytes it writes, row ->
  column (a rank's third of each row read alone, not the whole rows), column -> row and row ->
  row on another world, each output gathered back to the checkpoint.
- The planner is not all-pairs: an enumerable spec of 10^5 one-row shards of a [100000, 8] tensor,
  resharded to chunk dim 0 over 4 ranks, finishes well inside its bound (the time is printed).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_test  # noqa: E402  (its checkpoint: every byte-sized dtype)
from checkpoint_testlib import (BIN, TMP, cells, check, expect_every_rank, finish,  # noqa: E402
                                first_lines_per_rank, io_grew, launch_recording_pids, read_pid,
                                read_safetensors, run, same_rank_files, write_safetensors,
                                writing_file)

MIB = 1 << 20
EVERY = {"ranks": "all"}


def chunk(dim, placements=EVERY):
    return {"type": "chunk", "dim": dim, "placements": placements}


def checkpoint():
    tensors = checkpoint_test.make_checkpoint()
    tensors["f4.rows"] = ("F4", [8, 2], bytes(range(8)))      # one byte per row
    tensors["f6.rows"] = ("F6_E2M3", [4, 4], bytes(range(12)))  # three bytes per row
    path = os.path.join(TMP, "model.safetensors")
    write_safetensors(path, tensors, checkpoint_test.METADATA)
    return path


def new_plan(world):
    """Another layout of checkpoint_test's parameters: dims swapped, enumerable -> chunk,
    replicated -> sharded and sharded -> replicated; src_rank set (ignored by reshard)."""
    rules = [
        {"match": "embed.weight", "spec": chunk(0)},
        {"match": "layers.*.attn.qkv.weight", "spec": chunk(1)},
        {"match": "layers.*.mlp.weight", "spec": chunk(1, [f"rank:{r}" for r in reversed(range(world))])},
        {"match": "mask", "spec": chunk(0)},
        {"match": "norm.weight", "spec": chunk(0)},
        {"match": "dt.*.d0", "spec": chunk(-1)},
        {"match": "dt.*.d1", "spec": chunk(0)},
        {"match": "f*.rows", "spec": chunk(0)},
    ]  # twice.weight, bias: replicated now
    path = os.path.join(TMP, f"new-plan{world}.json")
    with open(path, "w") as f:
        json.dump({"src_rank": world - 1, "rules": rules}, f)
    return path


def old_plan(world):
    path = checkpoint_test.make_plan(world)
    with open(path) as f:
        plan = json.load(f)
    plan["rules"].append({"match": "f*.rows", "spec": chunk(0)})
    with open(path, "w") as f:
        json.dump(plan, f)
    return path


def across_worlds(ck):
    for old, new in ((4, 3), (3, 4), (1, 4), (4, 1)):
        label = f"reshard {old}->{new}"
        src = os.path.join(TMP, f"old-{old}-for-{new}")
        r = run(["shard", "--nproc", str(old), "--plan", old_plan(old), "--checkpoint", ck,
                 "--out", src])
        if not check(r.returncode == 0, f"{label}: shard: {r.stderr}"):
            continue
        out = os.path.join(TMP, f"resharded-{old}-{new}")
        r = run(["reshard", "--nproc", str(new), "--in", src, "--plan", new_plan(new), "--out", out])
        if not check(r.returncode == 0, f"{label}: exit {r.returncode}: {r.stderr}"):
            continue
        check("src_rank does not apply to reshard" in r.stderr and "shardkit reshard: " in r.stderr
              and "old_files" in r.stderr, f"{label}: warning or summary missing: {r.stderr}")
        with open(os.path.join(out, "index.json")) as f:
            index = json.load(f)
        check(index["strategy"] == "reshard" and index["src_rank"] == 0 and
              index["world_size"] == new, f"{label}: index.json {index['strategy']}")
        direct = os.path.join(TMP, f"shard-{new}-for-{old}")
        r = run(["shard", "--nproc", str(new), "--plan", new_plan(new), "--checkpoint", ck,
                 "--out", direct])
        if check(r.returncode == 0, f"{label}: shard with the new plan: {r.stderr}"):
            same_rank_files(out, direct, new, label)
        back = os.path.join(TMP, f"back-{old}-{new}.safetensors")
        g = run(["gather", "--in", out, "--out", back])
        if check(g.returncode == 0, f"{label}: gather: {g.stderr}"):
            with open(ck, "rb") as a, open(back, "rb") as b:
                check(a.read() == b.read(), f"{label}: gathered file differs from the checkpoint")


def on_hosts(hosts, out, extra=""):
    """reshard on 3 ranks where rank R reads hosts/host<R>/dir (its own copy of DIR)."""
    script = (f'exec "{BIN}" reshard --in "{hosts}/host$SHARDKIT_RANK/dir" --plan '
              f'"{new_plan(3)}" --out "{out}" {extra}')
    return subprocess.run([BIN, "launch", "--nproc", "3", "--timeout", "20", "--", "sh", "-c",
                           script], capture_output=True, text=True, timeout=60)


def refusals(ck):
    src = os.path.join(TMP, "old-4-for-3")
    r = run(["reshard", "--nproc", "2", "--in", src, "--plan", new_plan(2), "--out",
             os.path.join(src, "inside")])
    expect_every_rank("--out inside --in", r, 2, "is inside the shard directory")
    r = run(["reshard", "--in", ck, "--plan", new_plan(1), "--out", os.path.join(TMP, "o1")])
    expect_every_rank("--in a checkpoint file", r, 1, "not a shard directory")
    hosts = os.path.join(TMP, "hosts")
    for rank in (0, 1):
        shutil.copytree(src, os.path.join(hosts, f"host{rank}", "dir"))
    out = os.path.join(TMP, "hosts-out")
    expect_every_rank("copy missing on rank 2", on_hosts(hosts, out), 3,
                      "rank 2 cannot open the shard directory", f"{hosts}/host2/dir: no such")
    shutil.copytree(src, os.path.join(hosts, "host2", "dir"))
    with open(os.path.join(hosts, "host1", "dir", "index.json"), "a") as f:
        f.write("\n")
    expect_every_rank("another index.json on rank 1", on_hosts(hosts, out), 3, "rank 1 (",
                      "sees another shard directory than rank 0", "index.json: ", " bytes, sha256:")
    check(not os.path.exists(os.path.join(out, "index.json")), "refused runs wrote index.json")


def big_dir():
    """A 64 MiB checkpoint sharded over 3 ranks (rows): the input of the mid-run cases."""
    ck = os.path.join(TMP, "big.safetensors")
    write_safetensors(ck, {"w": ("F32", [4096, 4096], bytes(range(256)) * (64 * MIB // 256))})
    plan = os.path.join(TMP, "rows.json")
    with open(plan, "w") as f:
        json.dump({"rules": [{"match": "w", "spec": chunk(0)}]}, f)
    cols = os.path.join(TMP, "cols.json")
    with open(cols, "w") as f:
        json.dump({"rules": [{"match": "w", "spec": chunk(1)}]}, f)
    src = os.path.join(TMP, "big-3")
    r = run(["shard", "--nproc", "3", "--plan", plan, "--checkpoint", ck, "--out", src])
    check(r.returncode == 0, f"big shard: {r.stderr}")
    return src, cols


def rank_rows(stderr):
    """{rank: (bytes_read, bytes)} from reshard's summary table."""
    rows = {}
    for line in stderr.splitlines():
        parts = cells(re.sub(r"^\[rank \d+\]", "", line))
        if len(parts) >= 7 and parts[1].startswith("rank-") and parts[0].isdigit():
            rows[int(parts[0])] = (int(parts[3]), int(parts[5]))
    return rows


def bytes_read_bound(src, cols):
    """Every rank preads at most 1.25 x the bytes it writes: row -> column (a rank's 5.3 KiB
    third of each 16 KiB row, read alone, not the rows around it), column -> row, and row -> row
    on another world; under the default budget and under 8 MiB rounds."""
    rows = os.path.join(TMP, "rows.json")
    cases = [("row -> column", src, cols, 3, "by-cols", []),
             ("row -> column, 8 MiB", src, cols, 3, "by-cols-8", ["--memory-mib", "8"]),
             ("column -> row", os.path.join(TMP, "by-cols"), rows, 2, "by-rows", []),
             ("row -> row, 3 -> 4", src, rows, 4, "by-rows-4", [])]
    for label, source, plan, world, out, extra in cases:
        out = os.path.join(TMP, out)
        r = run(["reshard", "--nproc", str(world), "--in", source, "--plan", plan, "--out", out]
                + extra)
        if not check(r.returncode == 0, f"{label}: exit {r.returncode}: {r.stderr}"):
            continue
        table = rank_rows(r.stderr)
        print(f"{label}: (bytes_read, bytes) per rank {table}", flush=True)
        check(sorted(table) == list(range(world)), f"{label}: summary rows: {r.stderr}")
        for rank, (read, wrote) in table.items():
            check(wrote > 0 and read * 4 <= wrote * 5,
                  f"{label}: rank {rank} read {read} bytes to write {wrote} (over 1.25 x)")
        back = os.path.join(TMP, "bound-back.safetensors")
        g = run(["gather", "--in", out, "--out", back])
        if check(g.returncode == 0, f"{label}: gather: {g.stderr}"):
            with open(os.path.join(TMP, "big.safetensors"), "rb") as a, open(back, "rb") as b:
                check(a.read() == b.read(), f"{label}: gathered file differs from the checkpoint")


def mid_run(label, src, cols, reached, act, expect_code):
    """reshard (3 ranks, 8 MiB rounds, rows -> columns); rank 1 acted on once `reached`."""
    for attempt in range(1, 4):
        out = os.path.join(TMP, f"{label}-{attempt}")
        pids = os.path.join(TMP, f"{label}-{attempt}.pids")
        launcher = launch_recording_pids(
            pids, f'reshard --in "{src}" --plan "{cols}" --out "{out}" --memory-mib 8')
        start = time.time()
        pid = read_pid(os.path.join(pids, "1"), start + 20)
        acted = False
        while time.time() - start < 20 and launcher.poll() is None:
            if reached(pid, out):
                act(pid, src)
                acted = True
                break
            time.sleep(0.0005)
        _, stderr = launcher.communicate(timeout=60)
        if launcher.returncode == 0:
            print(f"{label}: rank 1 was done before the act landed; again", flush=True)
            continue
        check(acted, f"{label}: never acted: {stderr}")
        firsts = first_lines_per_rank(stderr, 3)
        print(f"{label}: exit {launcher.returncode}: {firsts.get(0)}", flush=True)
        check(launcher.returncode == expect_code, f"{label}: exit {launcher.returncode}: {stderr}")
        check(not os.path.exists(os.path.join(out, "index.json")), f"{label}: index.json written")
        return stderr
    check(False, f"{label}: rank 1 finished before the act in 3 tries")
    return ""


def replace_rank_file(pid, src):
    os.kill(pid, signal.SIGSTOP)
    path = os.path.join(src, "rank-00002.safetensors")
    shutil.copyfile(path, path + ".new")
    os.replace(path + ".new", path)  # the same bytes, another file
    os.kill(pid, signal.SIGCONT)


def planner_scale():
    n = 100000
    ck = os.path.join(TMP, "rows.safetensors")
    write_safetensors(ck, {"w": ("F32", [n, 8], bytes(range(256)) * (n * 32 // 256))})
    enum = os.path.join(TMP, "enum.json")
    shards = [{"offsets": [i, 0], "sizes": [1, 8], "placement": f"rank:{i % 4}"} for i in range(n)]
    with open(enum, "w") as f:
        json.dump({"rules": [{"match": "w", "spec": {"type": "enumerable", "shards": shards}}]}, f)
    rows = os.path.join(TMP, "rows4.json")
    with open(rows, "w") as f:
        json.dump({"rules": [{"match": "w", "spec": chunk(0)}]}, f)
    src, out = os.path.join(TMP, "enum-4"), os.path.join(TMP, "enum-resharded")
    r = run(["shard", "--nproc", "4", "--plan", enum, "--checkpoint", ck, "--out", src],
            timeout=600)
    if not check(r.returncode == 0, f"10^5 shards: shard: {r.stderr}"):
        return
    start = time.time()
    r = run(["reshard", "--nproc", "4", "--timeout", "300", "--in", src, "--plan", rows, "--out",
             out], timeout=600)
    took = time.time() - start
    planned = re.search(r"planned in ([0-9.]+) s", r.stderr)
    print(f"planner: 10^5 enumerable shards -> chunk dim 0 on 4 ranks: planned in "
          f"{planned.group(1) if planned else '?'} s (inputs, agreement, files); the whole "
          f"reshard took {took:.2f} s", flush=True)
    check(r.returncode == 0, f"10^5 shards: reshard: {r.stderr}")
    check(took < 120, f"10^5 shards: reshard took {took:.1f} s")
    _, _, tensors = read_safetensors(os.path.join(out, "rank-00001.safetensors"))
    with open(ck, "rb") as f:
        blob = f.read()[-n * 32:]
    quarter = n // 4 * 32
    check(tensors.get("w") == ("F32", [n // 4, 8], blob[quarter:2 * quarter]),
          "10^5 shards: rank 1's rows")


def main():
    ck = checkpoint()
    across_worlds(ck)
    refusals(ck)
    src, cols = big_dir()
    bytes_read_bound(src, cols)
    stderr = mid_run("replaced", src, cols, writing_file, replace_rank_file, 2)
    check("rank-00002.safetensors: was replaced while open" in stderr, f"replaced: {stderr}")
    big = big_dir()  # a fresh copy: the replaced one is fine, but keep the cases apart
    mid_run("killed", big[0], big[1], io_grew("rchar", 8 * MIB),
            lambda pid, _: os.kill(pid, signal.SIGKILL), 1)
    planner_scale()
    finish("reshard")


if __name__ == "__main__":
    main()
