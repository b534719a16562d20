"""The checkpoint mode of compare_torch.py: `shardkit shard`/`gather` beside PyTorch 1.13 and the
durable-copy floor, in one run.

Checkpoint mode (issue 14): one run, side by side, on a checkpoint of ck_mib/64 tensors "w000"...
of [4096, 4096] F32 (64 MiB each) written in WORKDIR, chunked on dim 0 over every rank:

  integration/bench/compare_torch.py --checkpoint-mode --shardkit bazel-bin/integration/shardkit \
      --ck-mib 2048 --nproc 4 [--repeats 1] [--workdir DIR]

- floor: `cp CK COPY && sync` (the durable-copy floor), after the page cache holds CK;
- torch: rank 0 maps CK (mmap + torch.frombuffer per tensor), the others give each parameter a meta
  tensor of its shape, `shard_parameter` per tensor over gloo, `torch.save` of each rank's local
  shards to WORKDIR/torch-out/rank-R.pt (no fsync); time inside the job (barrier to barrier, rank 0)
  and wall time with start-up; peak RSS = VmHWM of each rank's whole process;
- `shardkit shard` with the default --memory-mib and with --memory-mib 32 (output compared byte for
  byte), then `shardkit gather` of the first output (peak RSS from wait4's ru_maxrss; every tensor
  compared with CK's); per-rank peak RSS from the summary table `shard` prints on stderr.
Each timed step starts after a `sync`, so none pays for an earlier step's dirty pages. Prints a
table, the targets (C1, C3, C4) with pass/fail and one JSON line last; exits 1 only if an output is
wrong (a missed target is reported, not an error). Without torch the torch step is skipped (and
said so). WORKDIR defaults to a fresh temporary directory, removed afterwards; a given --workdir
keeps what the run wrote.
"""
import hashlib
import json
import mmap
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from torch_fix import TORCH_PYTHON, FixFinder, status_mib, torch_importable

# The torch ranks run the entry script (compare_torch.py --torch-rank R --torch-ck ...).
COMPARE_TORCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_torch.py")

CK_ROWS = CK_COLS = 4096                      # one [4096, 4096] F32 tensor = 64 MiB
CK_TENSOR_BYTES = CK_ROWS * CK_COLS * 4
TORCH_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                "BOOL": "bool"}
CK_PLAN = {"rules": [{"match": "*", "spec": {"type": "chunk", "dim": 0,
                                              "placements": {"ranks": "all"}}}]}
BUDGET_MIB = 512                              # shardkit's default --memory-mib
RSS_SLACK_MIB = 160
SMALL_BUDGET_MIB = 32
SMALL_RSS_LIMIT_MIB = 200
CHUNK = 8 << 20


def read_header(path):
    """(offset of the data section, {name: entry}) of a safetensors file (no __metadata__)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return 8 + length, header


def write_checkpoint(path, count):
    """count tensors "w000"... of [4096, 4096] F32: one 64 MiB SHAKE-128 block, rotated by a
    different number of bytes per tensor (no two rows or tensors alike); fsynced."""
    names = [f"w{i:03d}" for i in range(count)]
    header = {name: {"dtype": "F32", "shape": [CK_ROWS, CK_COLS],
                     "data_offsets": [i * CK_TENSOR_BYTES, (i + 1) * CK_TENSOR_BYTES]}
              for i, name in enumerate(names)}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    block = memoryview(hashlib.shake_128(b"shardkit checkpoint bench").digest(CK_TENSOR_BYTES))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i in range(count):
            k = (i * 16388 + 4) % CK_TENSOR_BYTES
            f.write(block[k:])
            f.write(block[:k])
        f.flush()
        os.fsync(f.fileno())


def read_through(path):
    """Reads the whole file once (warms the page cache)."""
    buf = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def same_bytes(a, b):
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb", buffering=0) as fa, open(b, "rb", buffering=0) as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                return False
            if not x:
                return True


def same_tensors(path, reference):
    """Whether the safetensors file at path holds exactly reference's tensors (dtype, shape,
    bytes); the headers' text and the data's order may differ. Returns (ok, a reason)."""
    base_a, head_a = read_header(path)
    base_b, head_b = read_header(reference)
    if sorted(head_a) != sorted(head_b):
        return False, "tensor names differ"
    with open(path, "rb", buffering=0) as fa, open(reference, "rb", buffering=0) as fb:
        for name in sorted(head_b):
            a, b = head_a[name], head_b[name]
            if (a["dtype"], a["shape"]) != (b["dtype"], b["shape"]):
                return False, f"{name}: dtype or shape differs"
            (begin_a, end_a), (begin_b, end_b) = a["data_offsets"], b["data_offsets"]
            if end_a - begin_a != end_b - begin_b:
                return False, f"{name}: byte count differs"
            fa.seek(base_a + begin_a)
            fb.seek(base_b + begin_b)
            left = end_b - begin_b
            while left:
                n = min(left, CHUNK)
                if fa.read(n) != fb.read(n):
                    return False, f"{name}: bytes differ"
                left -= n
    return True, ""


def torch_checkpoint_rank(args):
    """One rank of the PyTorch 1.13 script: rank 0 maps the checkpoint, the others give every
    parameter a meta tensor of its shape; shard_parameter per tensor; torch.save of the local
    shards."""
    sys.meta_path.insert(0, FixFinder)
    import torch
    import torch.distributed as dist
    from torch.distributed._shard import shard_parameter
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec

    rank, world = args.torch_rank, args.nproc
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank,
                            world_size=world)
    baseline = status_mib("VmRSS")
    dist.barrier()
    start = time.perf_counter()
    base, header = read_header(args.torch_ck)   # every rank knows the shapes (the model's)
    module = torch.nn.Module()
    if rank == 0:
        with open(args.torch_ck, "rb") as f:   # the mapping outlives the file object
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    for name in sorted(header):
        entry = header[name]
        dtype = getattr(torch, TORCH_DTYPES[entry["dtype"]])
        if rank == 0:
            begin, end = entry["data_offsets"]
            count = (end - begin) // torch.empty(0, dtype=dtype).element_size()
            tensor = torch.frombuffer(mapped, dtype=dtype, count=count,
                                      offset=base + begin).view(entry["shape"])
        else:
            tensor = torch.empty(entry["shape"], dtype=dtype, device="meta")
        module.register_parameter(name, torch.nn.Parameter(tensor, requires_grad=False))
    spec = ChunkShardingSpec(dim=0, placements=[f"rank:{r}/cpu" for r in range(world)])
    for name in sorted(header):
        shard_parameter(module, name, spec, src_rank=0)
    local = {name: getattr(module, name).local_shards()[0].tensor.detach()
             for name in sorted(header)}
    torch.save(local, os.path.join(args.torch_out, f"rank-{rank}.pt"))
    dist.barrier()
    seconds = time.perf_counter() - start
    print(json.dumps({"rank": rank, "in_job_s": seconds, "baseline_rss_mib": baseline,
                      "peak_rss_mib": status_mib("VmHWM"),
                      "local_bytes": sum(t.numel() * t.element_size() for t in local.values())}),
          flush=True)


def run_torch_checkpoint(args, ck, work, attempt):
    """One PyTorch job: (wall seconds with start-up, the ranks' JSON rows)."""
    out = os.path.join(work, "torch-out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    store = os.path.join(work, f"torch-store-{attempt}")
    flags = ["--nproc", str(args.nproc), "--store", store, "--torch-ck", ck, "--torch-out", out]
    os.sync()
    start = time.perf_counter()
    procs = [subprocess.Popen([TORCH_PYTHON, COMPARE_TORCH, "--torch-rank", str(r)]
                              + flags, stdout=subprocess.PIPE, text=True)
             for r in range(args.nproc)]
    try:
        texts = [p.communicate(timeout=args.timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        sys.exit(f"compare_torch: the PyTorch job ran past {args.timeout} s")
    wall = time.perf_counter() - start
    if os.path.exists(store):
        os.remove(store)
    if any(p.returncode != 0 for p in procs):
        sys.exit("compare_torch: a PyTorch rank failed")
    rows = [json.loads(line) for text in texts for line in text.splitlines() if line.strip()]
    return wall, sorted(rows, key=lambda r: r["rank"])


def parse_rank_table(text):
    """{rank: {column: value}} from the summary table `shardkit shard` prints on stderr."""
    columns, table = None, {}
    for line in text.splitlines():
        cells = re.sub(r"^\[rank \d+\]\s*", "", line).split()
        if columns is None:
            if cells[:2] == ["rank", "file"] and "peak_rss_mib" in cells:
                columns = cells
            continue
        if len(cells) != len(columns) or not cells[0].isdigit():
            break
        row = dict(zip(columns, cells))
        for key in ("tensors", "bytes"):
            row[key] = int(row[key])
        for key in ("peak_rss_mib", "rss_growth_mib"):
            row[key] = float(row[key])
        table[int(cells[0])] = row
    return table


def spawn_timed(cmd, log):
    """Runs cmd with stdout and stderr to the file log: (wall seconds, exit code, child's
    ru_maxrss in MiB)."""
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss / 1024


def run_checked(cmd, log):
    os.sync()
    wall, code, maxrss = spawn_timed(cmd, log)
    if code != 0:
        with open(log) as f:
            sys.stderr.write(f.read())
        sys.exit(f"compare_torch: exit {code}: {' '.join(cmd)}")
    return wall, maxrss


def checkpoint_mode(args):
    if args.ck_mib < 64 or args.ck_mib % 64:
        sys.exit("compare_torch: --ck-mib must be a positive multiple of 64")
    have_torch = torch_importable()
    if not have_torch:
        print(f"compare_torch: torch skipped: `{TORCH_PYTHON} -c 'import torch'` fails "
              "(apt-get install python3-torch)", file=sys.stderr)
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        work = os.path.abspath(args.workdir)
    else:
        work = tempfile.mkdtemp(prefix="compare_torch-")
    try:
        return checkpoint_bench(args, work, have_torch)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def checkpoint_bench(args, work, have_torch):
    count = args.ck_mib // 64
    ck = os.path.join(work, "checkpoint.safetensors")
    plan = os.path.join(work, "plan.json")
    out1, out2 = os.path.join(work, "out-default"), os.path.join(work, "out-m32")
    gathered = os.path.join(work, "gathered.safetensors")
    with open(plan, "w") as f:
        json.dump(CK_PLAN, f)
    start = time.perf_counter()
    write_checkpoint(ck, count)
    print(f"checkpoint: {count} x [{CK_ROWS}, {CK_COLS}] F32 = {os.path.getsize(ck) / 2**20:.1f} "
          f"MiB in {work}, written in {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    read_through(ck)
    warm = time.perf_counter() - start
    print(f"warm read: {warm:.2f} s ({os.path.getsize(ck) / warm / 1e9:.1f} GB/s)", flush=True)
    shard_cmd = [args.shardkit, "shard", "--nproc", str(args.nproc), "--plan", plan,
                 "--checkpoint", ck]

    floors, torch_walls, torch_jobs, torch_rows = [], [], [], {}
    shard1, shard2, gather_walls = [], [], []
    rss1, rss2, gather_rss = {}, {}, 0.0
    for attempt in range(args.repeats):
        copy = os.path.join(work, "copy.safetensors")
        os.sync()
        start = time.perf_counter()
        subprocess.run(["cp", ck, copy], check=True)
        subprocess.run(["sync"], check=True)
        floors.append(time.perf_counter() - start)
        os.remove(copy)
        print(f"[{attempt}] floor (cp + sync): {floors[-1]:.3f} s", flush=True)

        if have_torch:
            wall, rows = run_torch_checkpoint(args, ck, work, attempt)
            torch_walls.append(wall)
            torch_jobs.append(rows[0]["in_job_s"])
            for row in rows:
                old = torch_rows.get(row["rank"])
                if old is None or row["peak_rss_mib"] > old["peak_rss_mib"]:
                    torch_rows[row["rank"]] = row
            shutil.rmtree(os.path.join(work, "torch-out"), ignore_errors=True)
            print(f"[{attempt}] torch: {torch_jobs[-1]:.3f} s in the job, {wall:.3f} s wall",
                  flush=True)

        for out, walls, rss, extra in ((out1, shard1, rss1, []),
                                       (out2, shard2, rss2, ["--memory-mib",
                                                             str(SMALL_BUDGET_MIB)])):
            shutil.rmtree(out, ignore_errors=True)
            log = out + ".log"
            wall, _ = run_checked(shard_cmd + ["--out", out] + extra, log)
            walls.append(wall)
            with open(log) as f:
                table = parse_rank_table(f.read())
            if sorted(table) != list(range(args.nproc)):
                sys.exit(f"compare_torch: no per-rank summary table in {log}")
            for r, row in table.items():
                rss[r] = max(rss.get(r, 0.0), row["peak_rss_mib"])
            print(f"[{attempt}] shard {' '.join(extra) or '(default --memory-mib)'}: "
                  f"{wall:.3f} s", flush=True)

        if os.path.exists(gathered):
            os.remove(gathered)
        wall, maxrss = run_checked([args.shardkit, "gather", "--in", out1, "--out", gathered],
                                   gathered + ".log")
        gather_walls.append(wall)
        gather_rss = max(gather_rss, maxrss)
        print(f"[{attempt}] gather: {wall:.3f} s", flush=True)

    names1 = sorted(n for n in os.listdir(out1) if not n.endswith(".log"))
    names2 = sorted(n for n in os.listdir(out2) if not n.endswith(".log"))
    compared = [n for n in names1 if n.endswith(".safetensors") or n == "index.json"]
    identical = names1 == names2 and all(
        same_bytes(os.path.join(out1, n), os.path.join(out2, n)) for n in compared)
    gather_ok, why = same_tensors(gathered, ck)

    med = statistics.median
    floor, s1, s2, g = med(floors), med(shard1), med(shard2), med(gather_walls)
    tj = med(torch_jobs) if torch_jobs else None
    tw = med(torch_walls) if torch_walls else None
    rss_limit = BUDGET_MIB + RSS_SLACK_MIB

    print()
    print(f"{args.nproc} ranks, {count} x [{CK_ROWS}, {CK_COLS}] F32 ({args.ck_mib} MiB), "
          f"chunk dim 0 over all ranks; {args.repeats} repeat(s), medians")
    print(f"{'run':<24} {'wall_s':>8} {'x floor':>8} {'peak RSS MiB per rank':<32}")

    def line(name, wall, rss_list, note=""):
        rss_text = " ".join(f"{v:.0f}" for v in rss_list)
        print(f"{name:<24} {wall:>8.3f} {wall / floor:>8.2f} {rss_text:<32}{note}")

    line("floor: cp + sync", floor, [])
    if tj is not None:
        peaks = [torch_rows[r]["peak_rss_mib"] for r in sorted(torch_rows)]
        line("torch 1.13 in the job", tj, peaks, "  (no fsync)")
        line("torch 1.13 with start-up", tw, [])
    else:
        print(f"{'torch 1.13':<24} skipped: `{TORCH_PYTHON} -c 'import torch'` fails")
    line(f"shard (default M={BUDGET_MIB})", s1, [rss1[r] for r in sorted(rss1)])
    line(f"shard --memory-mib {SMALL_BUDGET_MIB}", s2, [rss2[r] for r in sorted(rss2)])
    line("gather", g, [gather_rss])

    checks = []

    def target(name, value, limit, text):
        ok = value <= limit
        checks.append(ok)
        print(f"{name:<4} {text:<52} {value:>9.2f} <= {limit:<8.2f} {'pass' if ok else 'FAIL'}")

    print()
    target("C1", s1 / floor, 1.6, "shard wall / floor")
    if tj is not None:
        print(f"{'C1':<4} {'shard wall / torch in-job (issue: about 0.27)':<52} {s1 / tj:>9.2f}"
              f"    (reported)")
        print(f"{'C1':<4} {'shard wall / torch wall with start-up':<52} {s1 / tw:>9.2f}"
              f"    (reported)")
    else:
        print(f"{'C1':<4} shard wall / torch: skipped (no torch)")
    target("C1", max(rss1.values()), rss_limit, "shard: max rank peak RSS MiB (M + 160)")
    target("C3", max(rss2.values()), SMALL_RSS_LIMIT_MIB,
           f"shard --memory-mib {SMALL_BUDGET_MIB}: max rank peak RSS MiB")
    checks.append(identical)
    print(f"{'C3':<4} {'output byte-identical to the default run':<52} {str(identical):>9}"
          f"{'':12} {'pass' if identical else 'FAIL'}")
    target("C4", g / floor, 2.0, "gather wall / floor")
    target("C4", gather_rss, rss_limit, "gather peak RSS MiB (M + 160)")
    checks.append(gather_ok)
    print(f"{'C4':<4} {'gathered tensors equal the checkpoint':<52} {str(gather_ok):>9}"
          f"{'':12} {'pass' if gather_ok else 'FAIL ' + why}")

    result = {
        "mode": "checkpoint", "nproc": args.nproc, "ck_mib": args.ck_mib, "tensors": count,
        "repeats": args.repeats, "warm_read_s": warm, "floor_s": floor,
        "torch": None if tj is None else {
            "in_job_s": tj, "wall_s": tw,
            "peak_rss_mib": [torch_rows[r]["peak_rss_mib"] for r in sorted(torch_rows)],
            "baseline_rss_mib": [torch_rows[r]["baseline_rss_mib"] for r in sorted(torch_rows)]},
        "shard": {"wall_s": s1, "peak_rss_mib": [rss1[r] for r in sorted(rss1)]},
        "shard_m32": {"wall_s": s2, "peak_rss_mib": [rss2[r] for r in sorted(rss2)],
                      "identical": identical},
        "gather": {"wall_s": g, "peak_rss_mib": gather_rss, "equal": gather_ok},
        "ratios": {"shard_over_floor": s1 / floor, "gather_over_floor": g / floor,
                   "shard_over_torch_in_job": None if tj is None else s1 / tj,
                   "shard_over_torch_wall": None if tw is None else s1 / tw},
        "pass": all(checks),
    }
    print(json.dumps(result))
    return 0 if identical and gather_ok else 1    # a missed target alone is not an error
