#!/usr/bin/env python3
"""The wheel, installed by pip into a fresh venv (not the build tree), used from real PyTorch 2.15
on four forked ranks over Gloo/TCP: shard/gather round trips against torch.chunk (uneven and
empty chunks, an enumerable spec, bool/float8/float16/int8, a numpy source, a meta tensor or
None off the source), zero-copy writes, zeros(), the same exception on every rank for a spec
that differs on one rank, a bad spec on one rank and a source given None, the GIL released while
a call waits, DeadlineExceededError for a rank that never joins; the checkpoint commands as calls
(shard, reshard, gather, spec check: wheel_checkpoint_worker.py); Ctrl-C in a waiting call
(KeyboardInterrupt there, the other ranks failing at once naming it). Also: every library the
extension and the CLI load is in the wheel or the C library's set (nothing from the build's
Debian packages) and it runs with the system's copies of those hidden, `import shardkit` imports
no torch, `python -m shardkit` is the CLI and finds
the wheel's plugins.

Needs SHARDKIT_TEST_PYTHON (tools/test passes the .venv's) with torch; skips without it."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit")
sys.path.insert(0, os.path.join(RUNFILES, "integration/tests"))
import checkpoint_testlib as lib  # noqa: E402

HERE = os.path.join(RUNFILES, "integration/python")
SYSTEM = re.compile(r"^(linux-vdso|ld-linux[-\w]*|libc|libm|libpthread|libdl|librt|libutil|"
                    r"libresolv|libstdc\+\+|libgcc_s)\.so")
# What a plugin may take from the system: its backend's own libraries.
PLUGIN_SYSTEM = re.compile(r"^(libuc[pstm]|libmpi|libopen-|libhwloc|libevent|libpmix|libnccl|"
                           r"libcuda|libcudart|libnuma|libz|liblzma|libudev|libltdl|libfabric|"
                           r"libpsm|librdmacm|libefa|libgfortran|libquadmath|libmunge)")


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def install(python):
    """A fresh venv with the wheel, and the test venv's site-packages (torch) after its own."""
    venv = lib.tmp_path("venv")
    made = run([python, "-m", "venv", "--without-pip", venv])
    lib.check(made.returncode == 0, f"venv: {made.stderr}")
    wheels = glob.glob(os.path.join(HERE, "shardkit-*.whl"))
    lib.check(len(wheels) == 1, f"one wheel in {HERE}: {wheels}")
    size = os.path.getsize(wheels[0])
    print(f"wheel: {os.path.basename(wheels[0])}, {size / 1e6:.1f} MB")
    lib.check(size <= 40e6, f"the wheel is {size / 1e6:.1f} MB, more than 40 MB")
    pip = run([python, "-m", "pip", "--python", os.path.join(venv, "bin", "python"), "install",
               "--no-deps", "--no-index", "--disable-pip-version-check", wheels[0]])
    lib.check(pip.returncode == 0, f"pip install: {pip.stdout}{pip.stderr}")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    outer = run([python, "-c", "import torch, os; print(os.path.dirname(os.path.dirname("
                 "torch.__file__)))"]).stdout.strip()
    with open(os.path.join(site, "zz_test_venv.pth"), "w") as f:
        f.write(outer + "\n")
    return os.path.join(venv, "bin", "python"), os.path.join(site, "shardkit")


def check_libraries(package):
    """What the extension, the CLI and the plugins load comes from the wheel or the system set."""
    binaries = glob.glob(os.path.join(package, "_core*.so")) + [
        os.path.join(package, "bin", "shardkit")]
    plugins = glob.glob(os.path.join(package, "lib", "shardkit", "*.so"))
    lib.check(len(binaries) == 2 and len(plugins) >= 2, f"binaries {binaries}, plugins {plugins}")
    for path in binaries + plugins:
        out = run(["ldd", path]).stdout
        for soname, where in re.findall(r"^\s*(\S+) => (\S+)", out, re.M):
            inside = os.path.realpath(where).startswith(os.path.realpath(package) + "/")
            allowed = SYSTEM.match(soname) or (path in plugins and PLUGIN_SYSTEM.match(soname))
            lib.check(inside or allowed,
                      f"{os.path.basename(path)} loads {soname} from {where}, outside the wheel")


def system_copies(package):
    """Where the system's own copies of the libraries the wheel bundles are (ldconfig's cache)."""
    ldconfig = next((p for p in ["/sbin/ldconfig", "/usr/sbin/ldconfig"] if os.path.exists(p)),
                    "ldconfig")
    cache = run([ldconfig, "-p"]).stdout
    found = {}
    for name in sorted(os.listdir(os.path.join(package, "lib"))):
        m = re.search(rf"^\s*{re.escape(name)} \(libc6,x86-64\) => (\S+)$", cache, re.M)
        if m:
            found[name] = os.path.realpath(m.group(1))
    return found


def check_without_system_copies(python, package):
    """In a private mount namespace with /dev/null bound over the system's copy of every library
    the wheel bundles (what a machine without the build's Debian packages lacks), the package
    still imports, connects a world of one, shards a tensor and runs its CLI."""
    hidden = system_copies(package)
    trial = lib.tmp_path("mount-trial")
    open(trial, "w").close()
    if run(["unshare", "--mount", "mount", "--bind", "/dev/null", trial]).returncode != 0:
        lib.skip("without the system's libraries", "no private mount namespace here "
                 "(unshare --mount and a bind mount need root outside a sandbox)")
        return
    lib.check(len(hidden) >= 5, f"the system's copies of the bundled libraries: {hidden}")
    mounts = " && ".join(f"mount --bind /dev/null '{path}'" for path in sorted(set(hidden.values())))
    gloo = next((name for name in hidden if name.startswith("libgloo")), "libgloo.so.0")
    probe = (f"! {python} -c 'import ctypes; ctypes.CDLL(\"{gloo}\")' 2>/dev/null && "
             f"{python} -c 'import shardkit; c = shardkit.init(rank=0, world_size=1); "
             "s = shardkit.shard_parameter(c, shardkit.zeros((4,), \"F32\", "
             "{\"type\": \"enumerable\", \"shards\": [{\"offsets\": [0], \"sizes\": [4], "
             "\"placement\": \"rank:0\"}]}, rank=0, world_size=1).local_tensors()[0], "
             "{\"type\": \"chunk\", \"dim\": 0, \"placements\": {\"ranks\": \"all\"}}); "
             "print(\"ok\", s.shape)' && "
             f"{python} -m shardkit --version")
    result = run(["unshare", "--mount", "sh", "-ec", mounts + " && " + probe])
    print(f"with {len(hidden)} system libraries hidden: exit {result.returncode}")
    lib.check(result.returncode == 0 and "ok (4,)" in result.stdout and
              "gloo: built in" in result.stdout,
              f"without the system's copies: exit {result.returncode}: {result.stdout}"
              f"{result.stderr}")


def check_import_and_cli(python):
    start = time.monotonic()
    imported = run([python, "-c", "import sys, shardkit; print('torch' in sys.modules)"])
    print(f"import shardkit (a fresh process, with startup): {time.monotonic() - start:.3f} s")
    lib.check(imported.stdout.strip() == "False",
              f"import shardkit: {imported.stdout}{imported.stderr} (torch imported?)")
    version = run([python, "-m", "shardkit", "--version"])
    lib.check(version.returncode == 0 and "gloo: built in" in version.stdout,
              f"python -m shardkit --version: {version.stdout}{version.stderr}")
    for backend in ["ucx", "mpi"]:
        lib.check(re.search(rf"^{backend}: plugin .*/shardkit/lib/shardkit/", version.stdout,
                            re.M) is not None, f"no {backend} plugin from the wheel: {version.stdout}")


def ranks(python, cases, world, started, store, worker_name="wheel_worker.py"):
    """Starts ranks `started` of `world` running `cases` (of worker_name, which takes RANK WORLD
    STORE OUT, wheel_worker.py CASES before them); returns each rank's results, with its output
    under "_output". The worker runs from a copy, isolated (-I): the source tree's shardkit/
    beside it must not shadow the installed package."""
    worker = lib.tmp_path(worker_name)
    for name in {worker_name, "wheel_worker.py"}:  # the other workers import wheel_worker's helpers
        shutil.copyfile(os.path.join(HERE, name), lib.tmp_path(name))
    first = [cases] if worker_name == "wheel_worker.py" else []
    procs = {}
    for rank in started:
        out = lib.tmp_path(f"{cases}-{rank}.json")
        procs[rank] = (subprocess.Popen([python, "-I", worker, *first, str(rank), str(world), store,
                                         out],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True), out)
    results = {}
    for rank, (proc, out) in procs.items():
        try:
            text, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
            lib.fail(f"{cases}: rank {rank} did not finish in 120 s: {text}")
            continue
        if not lib.check(proc.returncode == 0, f"{cases}: rank {rank} exit {proc.returncode}: "
                         f"{text}"):
            continue
        with open(out) as f:
            results[rank] = json.load(f)
        results[rank]["_output"] = text
    return results


def same_error(results, case, cls, *needles):
    errors = [r[case] for r in results.values()]
    if not lib.check(len(errors) == 4 and all(errors), f"{case}: {errors}"):
        return
    print(f"{case}: every rank: {errors[0]['class']}: {errors[0]['message'][:300]}")
    lib.check(all(e == errors[0] for e in errors), f"{case}: ranks differ: {errors}")
    lib.check(errors[0]["class"] == cls and errors[0]["code"] != "", f"{case}: {errors[0]}")
    for needle in needles:
        lib.check(needle in errors[0]["message"], f"{case}: no {needle!r} in {errors[0]}")


def check_main(python):
    results = ranks(python, "main", 4, range(4), "file://" + lib.tmp_path("store-main"))
    lib.check(len(results) == 4, f"main: results of ranks {sorted(results)}")
    for rank, r in results.items():
        lib.check(r["comm"] == [rank, 4, "gloo"], f"rank {rank}: comm {r['comm']}")
        for case in ["chunk_dim0", "gather_dst1", "gather_equal", "chunk_empty", "chunk_empty_gather",
                     "enumerable", "zero_copy", "dtype_bool", "dtype_float8_e4m3fn",
                     "dtype_float16", "dtype_int8", "numpy_source", "outlives_sharded_tensor",
                     "zeros", "zeros_gather",
                     "after_errors", "sync_m_to_n", "dtensor_shard0", "dtensor_shard1",
                     "dtensor_sync", "dtensor_submesh_sync", "inspect"]:
            lib.check(r.get(case) is True, f"rank {rank}: {case} is {r.get(case)}")
    same_error(results, "spec_differs", "InvalidArgumentError", "rank 3")
    same_error(results, "bad_json", "InvalidArgumentError", "rank 1", "dim")
    same_error(results, "source_none", "InvalidArgumentError", "source rank 2", "None")
    same_error(results, "sync_mismatch", "InvalidArgumentError", "a")
    for rank, r in results.items():
        lib.check((r["inspect_missing"] or {}).get("class") == "NotFoundError",
                  f"rank {rank}: inspect of a missing path: {r['inspect_missing']}")
    for rank, r in results.items():
        lib.check((r["dtensor_replicate"] or {}).get("class") == "InvalidArgumentError",
                  f"rank {rank}: from_dtensor of a Replicate DTensor: {r['dtensor_replicate']}")
    if 0 in results:
        print(f"GIL: rank 0's thread counted {results[0]['gil_counts']} while it waited")
        lib.check(results[0]["gil_counts"] > 1000,
                  f"a Python thread made no progress during a barrier: {results[0]['gil_counts']}")


def check_checkpoint(python):
    """wheel_checkpoint_worker.py: the checkpoint commands as calls, on four ranks."""
    results = ranks(python, "checkpoint", 4, range(4), "file://" + lib.tmp_path("store-ckpt"),
                    "wheel_checkpoint_worker.py")
    lib.check(len(results) == 4, f"checkpoint: results of ranks {sorted(results)}")
    for rank, r in results.items():
        lib.check(r["shard_report"] == [4, 2, 1, 1, "scatter", 4],
                  f"rank {rank}: shard_checkpoint's report {r['shard_report']}")
        lib.check(r["shard_summary"].startswith("shardkit shard: 2 parameters (1 sharded, 1 "
                                                "replicated) on 4 ranks, scatter from rank 0\n"),
                  f"rank {rank}: shard summary {r['shard_summary']!r}")
        lib.check(r["shard_local"] is True, f"rank {rank}: its rank file is not its chunk")
        lib.check(r["reshard_report"] == ["reshard", 4, 1],
                  f"rank {rank}: reshard_checkpoint's report {r['reshard_report']}")
        lib.check(r["after_errors"] is True, f"rank {rank}: the group after the errors")
    warned = [line for line in results.get(0, {}).get("idle_log", []) if "nothing.*" in line]
    lib.check(len(warned) == 1 and "matches no parameter" in warned[0],
              f"the idle rule's warning in rank 0's log: {results.get(0, {}).get('idle_log')}")
    lib.check(bool(warned) and warned[0] in results.get(0, {}).get("_output", ""),
              "the idle rule's warning was not written to rank 0's stderr")
    same_error(results, "format_on_rank3", "InvalidArgumentError", "rank 3", "bogus")
    same_error(results, "bad_plan", "InvalidArgumentError", "dim 5", "\"w\"")
    r = results.get(0)
    if not lib.check(r is not None, "checkpoint: no results of rank 0"):
        return
    for case in ["gather_rows", "gather_columns", "spec_text_as_cli", "dry_run_as_cli"]:
        lib.check(r.get(case) is True, f"rank 0: {case} is {r.get(case)}")
    lib.check(r["gather_summary"].startswith("shardkit gather: 2 parameters (246 B) from 4 rank "
                                             "files to "), f"gather summary {r['gather_summary']!r}")
    lib.check(r["gather_hf_files"] == [2, "model.safetensors.index.json"],
              f"gather into Hugging Face files of at most 100 bytes: {r['gather_hf_files']}")
    lib.check(r["spec_shards"] == [[0, [0, 0], [3, 6]], [1, [3, 0], [3, 6]], [2, [6, 0], [3, 6]],
                                   [3, [9, 0], [1, 6]]], f"spec_check's shards {r['spec_shards']}")
    for case, needle in [("gather_inside", "inside"), ("dry_run_no_world", "--world")]:
        error = r.get(case) or {}
        lib.check(error.get("class") == "InvalidArgumentError" and needle in error.get("message"),
                  f"rank 0: {case}: {error}")


def check_interrupt(python, backend):
    """Ctrl-C (SIGINT) on rank 1 of 3 waiting in a barrier: KeyboardInterrupt there at once; rank
    0, arriving 2 s later, and rank 2, waiting on rank 0, fail naming rank 1 as interrupted, long
    before their 30 s deadline; rank 1's communicator refuses the next call."""
    results = ranks(python, f"interrupt-{backend}", 3, range(3),
                    "file://" + lib.tmp_path(f"store-intr-{backend}"))
    if not lib.check(len(results) == 3, f"interrupt ({backend}): results of ranks {sorted(results)}"):
        return
    r1 = results[1]
    lib.check(r1["interrupt"] == "KeyboardInterrupt" and r1["interrupt_seconds"] < 1.5,
              f"interrupt: rank 1 {r1['interrupt']} after {r1['interrupt_seconds']:.2f} s")
    lib.check((r1["interrupt_after"] or {}).get("class") == "FailedPreconditionError",
              f"interrupt: rank 1's next call: {r1['interrupt_after']}")
    for rank, limit in [(0, 1.5), (2, 5.0)]:
        r = results[rank]
        error = r["interrupt"] if isinstance(r["interrupt"], dict) else {}
        print(f"interrupt ({backend}): rank {rank} after {r['interrupt_seconds']:.2f} s: {error}")
        lib.check(error.get("class") == "UnavailableError" and
                  "rank 1 was interrupted" in error.get("message", ""),
                  f"interrupt: rank {rank}: {r['interrupt']}")
        lib.check(r["interrupt_seconds"] < limit,
                  f"interrupt: rank {rank} took {r['interrupt_seconds']:.1f} s (deadline 30 s)")


def check_late(python):
    """World 3, rank 2 never starts: ranks 0 and 1 raise DeadlineExceededError naming it."""
    results = ranks(python, "late", 3, [0, 1], "file://" + lib.tmp_path("store-late"))
    for rank, r in results.items():
        error = r["late"] or {}
        lib.check(error.get("class") == "DeadlineExceededError" and "2" in error.get("message", ""),
                  f"late: rank {rank}: {error}")
        lib.check(r["late_seconds"] < 10, f"late: rank {rank} took {r['late_seconds']:.1f} s "
                  "for a 3 s deadline")
    lib.check(len(results) == 2, f"late: results of ranks {sorted(results)}")


def main():
    python = os.environ.get("SHARDKIT_TEST_PYTHON")
    if not python or run([python, "-c", "import torch, numpy"]).returncode != 0:
        lib.skip_test("wheel_test", "no SHARDKIT_TEST_PYTHON with torch and numpy "
                      "(tools/setup --test-venv)")
    fresh, package = install(python)
    if lib.failures:
        lib.finish("wheel_test")
    check_libraries(package)
    check_without_system_copies(fresh, package)
    check_import_and_cli(fresh)
    check_main(fresh)
    check_checkpoint(fresh)
    for backend in ["gloo", "ucx"]:
        check_interrupt(fresh, backend)
    check_late(fresh)
    lib.finish("wheel_test")


main()
