#!/usr/bin/env python3
"""Interrupted and failed runs leave no debris.

- SIGINT/SIGTERM to a running `shard --nproc 2`, `reshard --nproc 2`, `shard` (one process),
  `gather` and `gather --max-shard-size`, sent once a temporary file has appeared (64 MiB under
  `--memory-mib 1`: about 130 rounds): exit 130/143 (128 + signal; a lone process dies of the
  signal), no `*.tmp.*` file left, exactly one line on stderr — the source's, saying what the
  output holds: an earlier output untouched and still gathering (the new one is written beside it
  and swapped in at the commit; the next run removes what is left beside it), also when
  interrupted before any writing (rank 1 held back, rank 0 waiting for it), a directory this run
  had created removed (its new parents with it), a gather's earlier OUT untouched (byte for
  byte) — and no process of the run left.
- Temporary files of an earlier run: removed by the next run of the same kind when their process
  is gone (the pid of a finished child); left alone, without failing the run, when it runs (the
  pid of a `sleep`): rank files and index.json under `shard` writing in place (over a complete
  output the earlier directory goes whole at the commit, temporaries with it), OUT.tmp.PID under `gather`, the
  model files under `gather --max-shard-size` (which refuses a directory holding a running
  process's, naming it, and leaves it as it was).
- Two gathers into one OUT (a file, a Hugging Face folder): the second is exit 2, naming the
  other run, and the first completes; a killed writer's temporary file is removed while the
  writer is still a zombie.
- A run that fails after creating its output directory (a plan that does not fit the checkpoint:
  step 2) removes it, with the parents it created, on one rank and on two.
"""

import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, alive, check, descendants, finish,  # noqa: E402
                                read_pid, tmp_path, write_big_checkpoint, write_safetensors)

CK = os.path.join(TMP, "big.safetensors")
PLAN = os.path.join(TMP, "plan.json")
BAD_PLAN = os.path.join(TMP, "bad_plan.json")
SLOW = ["--memory-mib", "1"]
SIGNAME = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def temporaries(top):
    """Every *.tmp.* file below `top`."""
    found = []
    for root, _, files in os.walk(top):
        found += [os.path.join(root, f) for f in files if ".tmp." in f]
    return found


def wait_for(condition, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.0005)
    return False


def interrupt(args, watch, sig, label):
    """Starts `shardkit ARGS`, sends `sig` once a temporary file appears below `watch` (for a
    shard directory: rank 0's, the source's); returns (returncode, stderr lines, pids of the
    run's processes), or None if the run finished first."""
    process = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)

    def started():
        names = [os.path.basename(t) for t in temporaries(watch)]
        shards = [n for n in names if n.startswith("rank-")]
        return any(n.startswith("rank-00000.") for n in shards) if shards else bool(names)
    appeared = wait_for(lambda: process.poll() is not None or started())
    pids = descendants(process.pid)
    if process.poll() is None:
        process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    if not appeared or process.returncode == 0:
        print(f"{label}: the run ended before the signal landed (rc {process.returncode}); "
              "trying again", flush=True)
        return None
    return process.returncode, stderr.splitlines(), pids


def interrupt_landed(args, watch, sig, label, prepare):
    """interrupt(), again (3 tries at most) while the run finishes first on a fast machine;
    `prepare` resets the output before each try."""
    for _ in range(3):
        prepare()
        result = interrupt(args, watch, sig, label)
        if result is not None:
            return result
    check(False, f"{label}: the signal never landed while the run was writing")
    return None


def check_interrupted(label, result, code, line, watch):
    """`line`: the one stderr line expected, or a compiled pattern it must match whole."""
    if result is None:
        return
    returncode, lines, pids = result
    check(returncode == code, f"{label}: exit {returncode}, expected {code}: {lines}")
    if isinstance(line, str):
        check(lines == [line], f"{label}: stderr {lines}, expected [{line!r}]")
    else:
        check(len(lines) == 1 and line.fullmatch(lines[0]),
              f"{label}: stderr {lines}, expected one line matching {line.pattern!r}")
    check(not temporaries(watch), f"{label}: left {temporaries(watch)}")
    left = [p for p in pids if alive(p)]
    check(not left, f"{label}: processes {left} outlived the run")


def shard(out, nproc=2, slow=True):
    args = ["shard", "--plan", PLAN, "--checkpoint", CK, "--out", out] + (SLOW if slow else [])
    return args + (["--nproc", str(nproc)] if nproc > 1 else [])


def earlier_output(out):
    done = subprocess.run([BIN] + shard(out, slow=False), capture_output=True, text=True)
    check(done.returncode == 0, f"earlier output into {out}: {done.stderr}")


def reset(*dirs):
    for d in dirs:
        subprocess.run(["rm", "-rf", d], check=True)


def shard_interrupts():
    fresh = tmp_path("fresh", "a", "b")
    for sig in (signal.SIGINT, signal.SIGTERM):
        name = SIGNAME[sig]
        result = interrupt_landed(shard(fresh), tmp_path("fresh"), sig, f"shard {name} fresh",
                                  lambda: reset(tmp_path("fresh")))
        check_interrupted(f"shard {name} fresh", result, 128 + sig,
                          f"[rank 0] shardkit shard: interrupted ({name}): removed 1 temporary "
                          f"file here (every rank removes its own); {fresh}, which this run had "
                          "created, is removed", tmp_path("fresh"))
        check(not os.path.exists(tmp_path("fresh")),
              f"shard {name} fresh: {tmp_path('fresh')} is left")

    # Over a complete earlier output the run writes beside it (TOP/.earlier.shardkit-new-HEX) and
    # swaps at the commit: interrupted, OUT still holds the earlier output, whole; what is left
    # beside it goes with the next run.
    top = tmp_path("over")
    out = os.path.join(top, "earlier")
    result = interrupt_landed(shard(out), top, signal.SIGTERM, "shard over an earlier output",
                              lambda: (reset(top), earlier_output(out)))
    check_interrupted("shard over an earlier output", result, 143, re.compile(
        r"\[rank 0\] shardkit shard: interrupted \(SIGTERM\): removed 1 temporary file here \(every "
        rf"rank removes its own\); {re.escape(out)} still holds the earlier output, untouched"
        rf"( \({re.escape(top)}/\.earlier\.shardkit-new-[0-9a-f]{{16}} beside it goes with the next "
        r"run\))?"), top)
    check(os.path.exists(os.path.join(out, "index.json")), "over an earlier output: index.json gone")
    kept = subprocess.run([BIN, "gather", "--in", out, "--out", tmp_path("over.safetensors")],
                          capture_output=True, text=True)
    check(kept.returncode == 0, f"over an earlier output: it no longer gathers: {kept.stderr}")
    earlier_output(out)
    check(sorted(os.listdir(top)) == ["earlier"], f"the next run left {sorted(os.listdir(top))}")

    alone = tmp_path("alone")
    result = interrupt_landed(shard(alone, nproc=1), alone, signal.SIGINT, "shard, one process",
                              lambda: reset(alone))
    check_interrupted("shard, one process", result, -signal.SIGINT,
                      "shardkit shard: interrupted (SIGINT): removed 1 temporary file; "
                      f"{alone}, which this run had created, is removed", alone)
    check(not os.path.exists(alone), "shard, one process: the directory it created is left")


def shard_interrupted_before_clearing():
    """Rank 1 is held back reading its plan from a FIFO nobody writes; rank 0 has checked the
    output and opened the checkpoint (its report is set) and waits for rank 1 in the first status
    round: the earlier output is untouched."""
    out = tmp_path("untouched")
    reset(out)
    earlier_output(out)
    pids, fifo = tmp_path("untouched.pids"), tmp_path("plan.fifo")
    os.makedirs(pids, exist_ok=True)
    os.mkfifo(fifo)
    args = " ".join(f'"{a}"' for a in shard(out, nproc=1)[3:])  # after --plan PLAN
    script = (f'echo $$ > "{pids}/$SHARDKIT_RANK"; P="{PLAN}"; [ "$SHARDKIT_RANK" = 1 ] && '
              f'P="{fifo}"; exec "{BIN}" shard --plan "$P" {args}')
    launcher = subprocess.Popen([BIN, "launch", "--nproc", "2", "--", "sh", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rank0 = read_pid(os.path.join(pids, "0"), time.time() + 20)

    def opened_checkpoint():
        try:
            return any(os.readlink(f"/proc/{rank0}/fd/{fd}") == os.path.realpath(CK)
                       for fd in os.listdir(f"/proc/{rank0}/fd"))
        except OSError:
            return False
    check(wait_for(opened_checkpoint), "before clearing: rank 0 never opened the checkpoint")
    launcher.send_signal(signal.SIGINT)
    _, stderr = launcher.communicate(timeout=60)
    check(launcher.returncode == 130, f"before clearing: exit {launcher.returncode}: {stderr}")
    check(stderr.splitlines() == [
        "[rank 0] shardkit shard: interrupted (SIGINT): removed 0 temporary files here (every rank "
        f"removes its own); {out} still holds the earlier output, untouched"],
        f"before clearing: stderr {stderr}")
    check(os.path.exists(os.path.join(out, "index.json")), "before clearing: index.json is gone")
    gathered = subprocess.run([BIN, "gather", "--in", out, "--out", tmp_path("untouched.safetensors")],
                              capture_output=True, text=True)
    check(gathered.returncode == 0, f"before clearing: the earlier output: {gathered.stderr}")


def reshard_interrupt():
    old, new = tmp_path("old"), tmp_path("resharded")
    reset(old)
    earlier_output(old)
    args = ["reshard", "--in", old, "--plan", PLAN, "--out", new, "--nproc", "2"] + SLOW
    result = interrupt_landed(args, new, signal.SIGINT, "reshard", lambda: reset(new))
    check_interrupted("reshard", result, 130,
                      "[rank 0] shardkit reshard: interrupted (SIGINT): removed 1 temporary file "
                      f"here (every rank removes its own); {new}, which this run had created, is "
                      "removed", new)


def gather_interrupts():
    shards = tmp_path("old")  # reshard_interrupt's: a complete shard directory
    out_dir = tmp_path("g")
    out = os.path.join(out_dir, "model.safetensors")
    args = ["gather", "--in", shards, "--out", out] + SLOW
    result = interrupt_landed(args, out_dir, signal.SIGINT, "gather, no OUT",
                              lambda: (reset(out_dir), os.makedirs(out_dir)))
    check_interrupted("gather, no OUT", result, -signal.SIGINT,
                      "shardkit gather: interrupted (SIGINT): removed 1 temporary file; nothing "
                      f"is at {out}", out_dir)
    check(not os.path.exists(out), "gather, no OUT: OUT appeared")

    def earlier_file():
        reset(out_dir)
        os.makedirs(out_dir)
        write_safetensors(out, {"x": ("U8", [3], b"abc")})
    with_earlier = interrupt_landed(args, out_dir, signal.SIGTERM, "gather over OUT", earlier_file)
    check_interrupted("gather over OUT", with_earlier, -signal.SIGTERM,
                      "shardkit gather: interrupted (SIGTERM): removed 1 temporary file; "
                      f"{out} still holds the earlier file, untouched", out_dir)
    with open(out, "rb") as f:
        check(f.read().endswith(b"abc"), "gather over OUT: the earlier file changed")

    hf = tmp_path("hf", "new")
    hf_args = ["gather", "--in", shards, "--out", hf, "--max-shard-size", "8MB"] + SLOW
    result = interrupt_landed(hf_args, tmp_path("hf"), signal.SIGINT, "gather HF, new directory",
                              lambda: reset(tmp_path("hf")))
    removed = r"removed \d+ temporary files?( and \d+ written files?)?"
    check_interrupted("gather HF, new directory", result, -signal.SIGINT, re.compile(
        rf"shardkit gather: interrupted \(SIGINT\): {removed}; {re.escape(hf)}, which this run "
        "had created, is removed"), tmp_path("hf"))
    check(not os.path.exists(tmp_path("hf")), "gather HF, new directory: the directory is left")

    empty = tmp_path("hf-empty")
    result = interrupt_landed(hf_args[:4] + [empty] + hf_args[5:], empty, signal.SIGINT,
                              "gather HF, empty directory",
                              lambda: (reset(empty), os.makedirs(empty)))
    check_interrupted("gather HF, empty directory", result, -signal.SIGINT, re.compile(
        rf"shardkit gather: interrupted \(SIGINT\): {removed}; {re.escape(empty)} holds none of "
        "this run's files"), empty)
    left = sorted(os.listdir(empty))
    check(left == [], f"gather HF, empty directory: holds {left} (no lock file either)")


def gone_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def touch(*parts):
    with open(tmp_path(*parts), "w") as f:
        f.write("x")


def leftovers():
    gone = gone_pid()
    sleeper = subprocess.Popen(["sleep", "120"])
    live = sleeper.pid
    try:
        out = tmp_path("leftovers")
        reset(out)
        earlier_output(out)
        for name in (f"rank-00000.safetensors.tmp.{gone}", f"index.json.tmp.{gone}",
                     f"rank-00001.safetensors.tmp.{live}"):
            touch("leftovers", name)
        # In place (no complete output there): a gone process's temporaries are removed, a
        # running one's are left alone.
        os.remove(os.path.join(out, "index.json"))
        done = subprocess.run([BIN] + shard(out), capture_output=True, text=True)
        check(done.returncode == 0, f"shard leftovers: {done.stderr}")
        check(sorted(temporaries(out)) == [os.path.join(out, f"rank-00001.safetensors.tmp.{live}")],
              f"shard leftovers: {temporaries(out)}")
        # Over a complete output the earlier directory goes whole at the commit, temporaries too.
        done = subprocess.run([BIN] + shard(out), capture_output=True, text=True)
        check(done.returncode == 0, f"shard over leftovers: {done.stderr}")
        check(temporaries(out) == [], f"shard over leftovers: {temporaries(out)}")

        g = tmp_path("g-left")
        reset(g)
        os.makedirs(g)
        touch("g-left", f"model.safetensors.tmp.{gone}")
        touch("g-left", f"model.safetensors.tmp.{live}")
        touch("g-left", f"other.safetensors.tmp.{gone}")  # another file's: not gather's to remove
        done = subprocess.run([BIN, "gather", "--in", out, "--out", os.path.join(g, "model.safetensors")],
                              capture_output=True, text=True)
        check(done.returncode == 0, f"gather leftovers: {done.stderr}")
        check(sorted(os.listdir(g)) == sorted(["model.safetensors", f"model.safetensors.tmp.{live}",
                                               f"other.safetensors.tmp.{gone}"]),
              f"gather leftovers: {sorted(os.listdir(g))}")

        hf = tmp_path("hf-left")
        reset(hf)
        os.makedirs(hf)
        touch("hf-left", f"model-00001-of-00009.safetensors.tmp.{gone}")
        touch("hf-left", f"model.safetensors.index.json.tmp.{gone}")
        done = subprocess.run([BIN, "gather", "--in", out, "--out", hf, "--max-shard-size", "20MB"],
                              capture_output=True, text=True)
        check(done.returncode == 0, f"gather HF leftovers: {done.stderr}")
        check(not temporaries(hf), f"gather HF leftovers: {temporaries(hf)}")
        check(os.path.exists(os.path.join(hf, "model.safetensors.index.json")),
              f"gather HF leftovers: {sorted(os.listdir(hf))}")

        busy = tmp_path("hf-busy")
        reset(busy)
        os.makedirs(busy)
        touch("hf-busy", f"model.safetensors.tmp.{live}")
        done = subprocess.run([BIN, "gather", "--in", out, "--out", busy, "--max-shard-size", "20MB"],
                              capture_output=True, text=True)
        check(done.returncode == 2, f"gather HF, a running process's file: exit {done.returncode}")
        check(done.stderr == f"shardkit gather: {busy}: holds model.safetensors.tmp.{live}, a "
              f"temporary file of process {live}, which is running on this host: left alone "
              f"(remove it yourself if no shardkit gather is writing {busy})\n",
              f"gather HF, a running process's file: {done.stderr}")
        check(os.listdir(busy) == [f"model.safetensors.tmp.{live}"],
              f"gather HF, a running process's file: {os.listdir(busy)}")
    finally:
        sleeper.kill()
        sleeper.wait()


def concurrent_writers():
    """A second gather into the OUT (or the Hugging Face folder) a first one is writing: exit 2 at
    once naming the other run, the first one unharmed; a zombie's temporary file counts as dead."""
    shards = tmp_path("old")  # reshard_interrupt's: a complete shard directory
    for label, out, extra, what in (
            ("one file", tmp_path("cc", "model.safetensors"), [], "this file"),
            ("Hugging Face", tmp_path("cc-hf"), ["--max-shard-size", "8MB"], "this directory")):
        reset(tmp_path("cc"), tmp_path("cc-hf"))
        os.makedirs(tmp_path("cc"))
        first = subprocess.Popen([BIN, "gather", "--in", shards, "--out", out] + extra + SLOW,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watch = out if os.path.isdir(out) or extra else os.path.dirname(out)
        wait_for(lambda: first.poll() is not None or bool(temporaries(watch)))
        second = subprocess.run([BIN, "gather", "--in", shards, "--out", out] + extra,
                                capture_output=True, text=True)
        # The first ran alone if it exited, or if its Hugging Face files were all in place before
        # the second looked (it was only exiting: slow under the sanitizers).
        ran_alone = first.poll() is not None or (
            bool(extra) and second.returncode == 2 and "is not empty (holds" in second.stderr
            and ".tmp." not in second.stderr)
        _, first_err = first.communicate(timeout=120)
        check(first.returncode == 0, f"concurrent {label}: the first gather: {first_err}")
        if ran_alone:
            print(f"concurrent {label}: the first gather ended too soon to test", flush=True)
            continue
        check(second.returncode == 2 and f"another shardkit run is writing {what}" in second.stderr,
              f"concurrent {label}: the second gather: exit {second.returncode}: {second.stderr}")
    # A killed writer that is still a zombie (its parent has not reaped it) left its temporary
    # file: the next gather removes it.
    out = tmp_path("cc", "z.safetensors")
    zombie = subprocess.Popen(["sleep", "60"])
    touch("cc", f"z.safetensors.tmp.{zombie.pid}")
    zombie.kill()
    time.sleep(0.2)  # not waited for: a zombie
    done = subprocess.run([BIN, "gather", "--in", shards, "--out", out], capture_output=True,
                          text=True)
    check(done.returncode == 0 and not os.path.exists(f"{out}.tmp.{zombie.pid}"),
          f"a zombie's temporary file: exit {done.returncode}, left "
          f"{os.path.exists(f'{out}.tmp.{zombie.pid}')}: {done.stderr}")
    zombie.wait()


def failed_runs():
    for nproc in (1, 2):
        top = tmp_path(f"failed{nproc}")
        reset(top)
        args = ["shard", "--plan", BAD_PLAN, "--checkpoint", CK, "--out", os.path.join(top, "b", "c")]
        done = subprocess.run([BIN] + args + (["--nproc", "2"] if nproc > 1 else []),
                              capture_output=True, text=True)
        check(done.returncode == 2 and "dim 5 is out of range" in done.stderr,
              f"failed shard ({nproc}): exit {done.returncode}: {done.stderr}")
        check(not os.path.exists(top), f"failed shard ({nproc}): {top} is left")


def main():
    # 64 MiB float32 "w" [4096, 4096], columns over the ranks; a small replicated "b". The bad
    # plan's dim 5 fails at step 2, once the output directory exists.
    write_big_checkpoint(CK, PLAN, dim=1)
    with open(BAD_PLAN, "w") as f:
        f.write(open(PLAN).read().replace('"dim": 1', '"dim": 5'))
    shard_interrupts()
    shard_interrupted_before_clearing()
    reshard_interrupt()
    gather_interrupts()
    leftovers()
    concurrent_writers()
    failed_runs()
    finish("interrupt")


if __name__ == "__main__":
    main()
