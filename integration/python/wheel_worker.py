"""One rank of wheel_test: runs in the venv the wheel was installed into, with real torch.

    python wheel_worker.py CASES RANK WORLD STORE OUT.json

CASES: "main" (the round trips, errors and GIL cases, in one rank group), "late" (a job one
rank never joins) or "interrupt-BACKEND" (Ctrl-C on rank 1 of 3 while it waits in a barrier). Writes OUT.json: {case: what this rank saw}; the test compares ranks.
"""

import gc
import json
import os
import signal
import sys
import threading
import time

import numpy
import torch

import shardkit

if __name__ == "__main__":
    CASES, RANK, WORLD, STORE, OUT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4], sys.argv[5]
ALL = {"ranks": "all"}
results = {}


def chunk_spec(dim):
    return {"type": "chunk", "dim": dim, "placements": ALL}


def error_of(call):
    try:
        call()
    except shardkit.Error as e:
        return {"class": type(e).__name__, "code": e.code, "message": str(e)}
    return None


def chunks_match(st, whole, dim):
    """This rank's local tensors are torch.chunk's pieces for its rank (none past the last)."""
    expected = list(torch.chunk(whole, WORLD, dim))
    local = st.local_tensors()
    mine = [expected[RANK]] if RANK < len(expected) else []
    got = [t for t in local if t.numel() > 0]
    return len(got) == len(mine) and all(torch.equal(a, b) for a, b in zip(got, mine))


def round_trips(comm):
    x = torch.randn(10, 3, generator=torch.Generator().manual_seed(1))  # chunks 3, 3, 3, 1
    st = shardkit.shard_parameter(comm, x if RANK == 0 else None, chunk_spec(0))
    results["chunk_dim0"] = chunks_match(st, x, 0)
    on_one = st.gather(dst=1)
    results["gather_dst1"] = torch.equal(on_one, x) if RANK == 1 else on_one is None
    whole = st.gather(dst=0)
    results["gather_equal"] = torch.equal(whole, x) if RANK == 0 else whole is None
    y = torch.arange(6, dtype=torch.float32).reshape(3, 2).to(torch.bfloat16)  # 1, 1, 0, 0
    meta = torch.empty(3, 2, dtype=torch.bfloat16, device="meta")
    st = shardkit.shard_parameter(comm, y if RANK == 2 else meta, chunk_spec(1), src_rank=2)
    results["chunk_empty"] = chunks_match(st, y, 1)
    on_three = st.gather(3)
    results["chunk_empty_gather"] = torch.equal(on_three, y) if RANK == 3 else on_three is None
    z = torch.arange(24, dtype=torch.int64).reshape(4, 6)
    shards = [{"offsets": [0, 0], "sizes": [2, 3], "placement": "rank:0"},
              {"offsets": [0, 3], "sizes": [2, 3], "placement": "rank:0"},
              {"offsets": [2, 0], "sizes": [2, 4], "placement": "rank:1"},
              {"offsets": [2, 4], "sizes": [2, 2], "placement": "rank:2"}]
    st = shardkit.shard_parameter(comm, z if RANK == 0 else None,
                                  {"type": "enumerable", "shards": shards})
    views = [z[s["offsets"][0]:s["offsets"][0] + s["sizes"][0],
               s["offsets"][1]:s["offsets"][1] + s["sizes"][1]] for s in shards]
    mine = [views[i] for i in st.local_indices]
    results["enumerable"] = (len(mine) == len(st.local_tensors()) and
                             all(torch.equal(a, b) for a, b in zip(st.local_tensors(), mine)) and
                             st.local_indices == [i for i, s in enumerate(shards)
                                                  if s["placement"] == f"rank:{RANK}"])


def zero_copy_and_dtypes(comm):
    x = torch.zeros(8, 5)
    st = shardkit.shard_parameter(comm, x if RANK == 0 else None, chunk_spec(0))
    for t in st.local_tensors():
        t.fill_(RANK + 1)  # a write through the view
    whole = st.gather(0)
    expected = torch.arange(1, WORLD + 1, dtype=torch.float32).repeat_interleave(2)[:, None]
    results["zero_copy"] = bool(torch.equal(whole, expected.expand(8, 5))) if RANK == 0 else True
    for dtype in [torch.bool, torch.float8_e4m3fn, torch.float16, torch.int8]:
        name = str(dtype).replace("torch.", "")
        src = (torch.arange(36).reshape(9, 4) % 3).to(dtype)  # chunks of 3, 3, 3, 0 rows
        st = shardkit.shard_parameter(comm, src if RANK == 0 else None, chunk_spec(0))
        local = st.local_tensors()
        expected = torch.chunk(src, WORLD, 0)[RANK] if RANK < 3 else src[9:]
        back = st.gather(0)
        results["dtype_" + name] = (
            st.dtype == name and len(local) == 1 and local[0].dtype == dtype and
            torch.equal(local[0].view(torch.uint8), expected.view(torch.uint8)) and
            (back is None if RANK else torch.equal(back.view(torch.uint8), src.view(torch.uint8))))
    arr = numpy.arange(12, dtype=numpy.float64).reshape(4, 3)
    st = shardkit.shard_parameter(comm, arr if RANK == 0 else None, chunk_spec(0))
    results["numpy_source"] = torch.equal(st.local_tensors()[0],
                                          torch.from_numpy(arr)[RANK:RANK + 1])
    st = shardkit.shard_parameter(comm, x.fill_(7) if RANK == 0 else None, chunk_spec(0))
    kept = st.local_tensors()[0]
    del st
    gc.collect()
    junk = [torch.full((2, 5), -1.0) for _ in range(64)]  # would reuse freed memory
    results["outlives_sharded_tensor"] = bool((kept == 7).all()) and len(junk) == 64
    z = shardkit.zeros((8, 4), "BF16", chunk_spec(0), rank=RANK, world_size=WORLD)
    results["zeros"] = [list(t.shape) for t in z.local_tensors()] == [[2, 4]] and \
        all(bool((t == 0).all()) for t in z.local_tensors()) and z.dtype == "bfloat16"
    gathered = z.gather(0, comm=comm)
    results["zeros_gather"] = tuple(gathered.shape) == (8, 4) if RANK == 0 else gathered is None


def errors(comm):
    x = torch.ones(8, 4)
    spec = chunk_spec(1 if RANK == 3 else 0)
    results["spec_differs"] = error_of(
        lambda: shardkit.shard_parameter(comm, x if RANK == 0 else None, spec))
    bad = '{"type": "chunk", "dim": "x", "placements": {"ranks": "all"}}' if RANK == 1 else \
        chunk_spec(0)
    results["bad_json"] = error_of(lambda: shardkit.shard_parameter(comm, x, bad))
    results["source_none"] = error_of(
        lambda: shardkit.shard_parameter(comm, None, chunk_spec(0), src_rank=2))
    # Still usable after those: they were agreed before any data moved.
    st = shardkit.shard_parameter(comm, x if RANK == 0 else None, chunk_spec(0))
    results["after_errors"] = torch.equal(st.local_tensors()[0], torch.ones(2, 4))


def dtensors(comm):
    """FSDP2-style Shard(0) and TP-style Shard(1) DTensors on a mesh of the same four ranks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo", init_method="file://" + STORE[len("file://"):] + "-torch",
                            rank=RANK, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    x = torch.arange(10 * 6, dtype=torch.float32).reshape(10, 6)
    for dim in [0, 1]:
        dt = distribute_tensor(x, mesh, [Shard(dim)])
        st = shardkit.from_dtensor(comm, dt)
        local = st.local_tensors()[0]
        same_memory = local.numel() == 0 or local.data_ptr() == dt.to_local().data_ptr()
        whole = st.gather(0)
        results[f"dtensor_shard{dim}"] = same_memory and chunks_match(st, x, dim) and \
            (whole is None if RANK else torch.equal(whole, x))
    results["dtensor_replicate"] = error_of(
        lambda: shardkit.from_dtensor(comm, distribute_tensor(x, mesh, [Replicate()])))
    # DTensor rows on all four ranks -> columns on all four (the groups overlap entirely).
    dt = distribute_tensor(x, mesh, [Shard(0)])
    dst = {"w": shardkit.zeros((10, 6), torch.float32, chunk_spec(1), rank=RANK, world_size=WORLD)}
    plan = shardkit.plan_sync(comm, {"w": dt}, dst)
    plan.sync({"w": dt}, dst, verify=True)
    results["dtensor_sync"] = chunks_match(dst["w"], x, 1)
    # The README's case: DTensor rows on a mesh of ranks 0-1 -> columns on ranks 2-3.
    from torch.distributed.device_mesh import DeviceMesh
    trainers = DeviceMesh("cpu", [0, 1])
    src = {"w": distribute_tensor(x, trainers, [Shard(0)])} if RANK < 2 else None
    cols = {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}
    dst = {"w": shardkit.zeros((10, 6), "F32", cols, rank=RANK - 2, world_size=2)} \
        if RANK >= 2 else None
    plan = shardkit.plan_sync(comm, src, dst, source_ranks=[0, 1], destination_ranks=[2, 3])
    plan.sync(src, dst, verify=True)
    results["dtensor_submesh_sync"] = RANK < 2 or torch.equal(
        dst["w"].local_tensors()[0], torch.chunk(x, 2, 1)[RANK - 2])
    dist.destroy_process_group()


def sync_m_to_n(comm):
    """Ranks 0-1 hold rows of "a" and all of "b"; ranks 2-3 get columns of "a" and "b", twice."""
    a = torch.arange(6 * 4, dtype=torch.float32).reshape(6, 4)
    b = torch.arange(5, dtype=torch.bfloat16)
    rows = {"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1"]}
    cols = {"type": "chunk", "dim": 1, "placements": ["rank:0", "rank:1"]}
    src = dst = None
    if RANK < 2:
        src = {"a": shardkit.zeros((6, 4), torch.float32, rows, rank=RANK, world_size=2),
               "b": b.clone()}
        src["a"].local_tensors()[0].copy_(a[3 * RANK:3 * RANK + 3])
    else:
        dst = {"a": shardkit.zeros((6, 4), "F32", cols, rank=RANK - 2, world_size=2),
               "b": torch.zeros(5, dtype=torch.bfloat16)}
    plan = shardkit.plan_sync(comm, src, dst, source_ranks=[0, 1], destination_ranks=[2, 3])
    ok = plan.names == ["a", "b"] and plan.fingerprint.startswith("sha256:")
    for step in range(2):
        if src is not None:
            src["a"].local_tensors()[0].add_(step)
            src["b"].add_(step)
        report = plan.sync(src, dst, verify=True)
        if dst is not None:
            half = RANK - 2
            ok = ok and torch.equal(dst["a"].local_tensors()[0], (a + step)[:, 2 * half:2 * half + 2])
            ok = ok and torch.equal(dst["b"], b + step) and report.updated == ["a", "b"]
    results["sync_m_to_n"] = ok
    wrong = {"a": shardkit.zeros((6, 5), "F32", cols, rank=RANK - 2, world_size=2)} \
        if RANK >= 2 else None
    results["sync_mismatch"] = error_of(lambda: shardkit.plan_sync(
        comm, {"a": src["a"]} if src else None, wrong, source_ranks=[0, 1],
        destination_ranks=[2, 3]))


def inspect_files():
    """shardkit.inspect of a safetensors file torch's safetensors wrote, and of a missing path."""
    from safetensors.torch import save_file
    path = STORE[len("file://"):] + f"-rank{RANK}.safetensors"
    save_file({"b": torch.zeros(3, dtype=torch.bfloat16), "a": torch.ones(2, 4)}, path,
              metadata={"format": "pt"})
    found = shardkit.inspect(path)
    results["inspect"] = (found.kind == "checkpoint" and found.columns[:3] == ["name", "dtype",
                                                                                "shape"] and
                          [r["name"] for r in found.records()] == ["a", "b"] and
                          found.records()[1]["dtype"] == "BF16" and
                          found.metadata == {"format": "pt"})
    results["inspect_missing"] = error_of(lambda: shardkit.inspect(path + ".missing"))


def gil(comm):
    """Rank 1 comes to the barrier a second late; meanwhile rank 0's Python thread counts."""
    if RANK == 1:
        time.sleep(1.0)
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    comm.barrier()
    stop.set()
    thread.join()
    results["gil_counts"] = count[0]


def interrupt(backend):
    """Rank 1 gets SIGINT 0.5 s into a barrier that rank 0 joins only 2 s in; rank 2 waits too."""
    comm = shardkit.init(backend, rank=RANK, world_size=WORLD, store=STORE, timeout=30)
    comm.barrier()
    # Background processes may inherit SIGINT ignored: Python then installs no handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if RANK == 1:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    if RANK == 0:
        time.sleep(2)
    start = time.monotonic()
    # The first error of two barriers: a rank's own part of the first may complete (UCX: rank 1's
    # message had arrived before it was interrupted); then the second fails.
    results["interrupt"] = "returned"
    for _ in range(2):
        try:
            comm.barrier()
        except KeyboardInterrupt:
            results["interrupt"] = "KeyboardInterrupt"
            break
        except shardkit.Error as e:
            results["interrupt"] = {"class": type(e).__name__, "message": str(e)}
            break
    results["interrupt_seconds"] = time.monotonic() - start
    results["interrupt_after"] = error_of(comm.barrier)


def main():
    if CASES.startswith("interrupt-"):
        interrupt(CASES[len("interrupt-"):])
    elif CASES == "late":
        start = time.monotonic()
        results["late"] = error_of(lambda: shardkit.init(rank=RANK, world_size=WORLD,
                                                         store=STORE, timeout=3))
        results["late_seconds"] = time.monotonic() - start
    else:
        comm = shardkit.init(rank=RANK, world_size=WORLD, store=STORE, timeout=30)
        results["comm"] = [comm.rank, comm.world_size, comm.backend]
        round_trips(comm)
        zero_copy_and_dtypes(comm)
        errors(comm)
        sync_m_to_n(comm)
        dtensors(comm)
        inspect_files()
        gil(comm)
    with open(OUT, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
