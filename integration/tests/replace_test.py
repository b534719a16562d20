#!/usr/bin/env python3
"""`reshard` into a directory holding a complete earlier output, stopped three ways while it
streams: the earlier output must come through whole — it gathers to the same bytes — and the next
run must replace it and leave nothing beside it.

- Ctrl-C: SIGINT to the launcher's whole process group (what a terminal sends), once a rank's
  temporary file exists beside the output: exit 130, the earlier output whole.
- A full disk: the output on a 40 MiB tmpfs (a mount namespace of its own, `unshare -m`) holding a
  24 MiB earlier output; the new one does not fit beside it: exit 1 naming ENOSPC and the file,
  the earlier output whole, nothing left beside it. Where mounting is not allowed this part is
  recorded as skipped, with the reason.
- A dead rank: rank 1 SIGKILLed while writing its file: the survivors exit 1, the earlier output
  whole, the new one's directory removed by the source.
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, check, descendants, finish,  # noqa: E402
                                launch_recording_pids, new_dirs_beside, read_pid, skip, tmp_path,
                                write_safetensors, writing_file)

MIB = 1 << 20
CK = os.path.join(TMP, "ck.safetensors")
PLAN2, PLAN3 = os.path.join(TMP, "p2.json"), os.path.join(TMP, "p3.json")
SLOW = ["--memory-mib", "1"]


def write_inputs(mib):
    """A checkpoint of `mib` MiB (float32 "w" rows × 1024, a replicated "b") and two plans."""
    rows = mib * MIB // 4096
    blob = bytes(range(256)) * (mib * MIB // 256)
    write_safetensors(CK, {"w": ("F32", [rows, 1024], blob), "b": ("F32", [4], b"\2" * 16)})
    for path, dim in ((PLAN2, 0), (PLAN3, 1)):
        with open(path, "w") as f:
            f.write('{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": %d, '
                    '"placements": {"ranks": "all"}}}]}' % dim)


def run(args, **kwargs):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300, **kwargs)


def gathered(out, label):
    """The bytes `gather` makes of `out` (None if it fails)."""
    target = tmp_path(f"{label}.gathered.safetensors")
    r = run(["gather", "--in", out, "--out", target])
    if not check(r.returncode == 0, f"{label}: gather of the output: {r.stderr}"):
        return None
    with open(target, "rb") as f:
        return f.read()


def earlier_output(source, out):
    """`out` as a complete reshard of `source` onto 2 ranks; its gathered bytes."""
    r = run(["reshard", "--in", source, "--plan", PLAN2, "--out", out, "--nproc", "2"])
    check(r.returncode == 0, f"earlier output: {r.stderr}")
    return gathered(out, os.path.basename(out) + "-earlier")


def replaced_cleanly(source, out, label):
    """The next run replaces `out` and leaves nothing beside it."""
    r = run(["reshard", "--in", source, "--plan", PLAN3, "--out", out, "--nproc", "3"])
    check(r.returncode == 0, f"{label}: the next run: {r.stderr}")
    check(sorted(os.listdir(out)) == ["index.json"] + [f"rank-{r:05d}.safetensors" for r in range(3)],
          f"{label}: the next run's output: {sorted(os.listdir(out))}")
    check(new_dirs_beside(out) == [], f"{label}: left beside it: {new_dirs_beside(out)}")


def ctrl_c(source, reference):
    out = tmp_path("ctrl-c", "out")
    os.makedirs(os.path.dirname(out))
    check(earlier_output(source, out) == reference, "Ctrl-C: the earlier output")
    for attempt in range(3):
        run_ = subprocess.Popen([BIN, "reshard", "--in", source, "--plan", PLAN3, "--out", out,
                                 "--nproc", "2"] + SLOW, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline and run_.poll() is None and not any(
                writing_file(pid, out) for pid in [run_.pid] + descendants(run_.pid)):
            time.sleep(0.0005)
        if run_.poll() is None:
            os.killpg(run_.pid, signal.SIGINT)
        _, stderr = run_.communicate(timeout=60)
        if run_.returncode != 0:
            break
        print(f"Ctrl-C: the run ended before the signal (try {attempt + 1})", flush=True)
        earlier_output(source, out)
    check(run_.returncode == 130, f"Ctrl-C: exit {run_.returncode}: {stderr}")
    check(f"{out} still holds the earlier output, untouched" in stderr, f"Ctrl-C: {stderr}")
    check(gathered(out, "ctrl-c") == reference, "Ctrl-C: the earlier output changed")
    replaced_cleanly(source, out, "Ctrl-C")


FULL_DISK = r'''
set -u
mount -t tmpfs -o size=40m tmpfs "$1" || exit 77
out="$1/out"
"$BIN" reshard --in "$2" --plan "$3" --out "$out" --nproc 2 >/dev/null 2>"$1/first.err" || {
  cat "$1/first.err"; exit 3; }
"$BIN" gather --in "$out" --out "$4/disk-before.safetensors" 2>/dev/null || exit 4
"$BIN" reshard --in "$2" --plan "$5" --out "$out" --nproc 2 2>"$4/disk-second.err"
echo "second=$?"
"$BIN" gather --in "$out" --out "$4/disk-after.safetensors" 2>"$4/disk-gather.err"
echo "gather=$?"
ls -A "$1" | tr '\n' ' '
echo
'''


def full_disk(source):
    mount = tmp_path("disk")
    os.makedirs(mount)
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", FULL_DISK, "sh",
                        mount, source, PLAN2, TMP, PLAN3], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, BIN=BIN))
    if r.returncode == 77 or "unshare:" in r.stderr:
        skip("full disk", f"cannot mount a tmpfs here: {r.stderr.strip()}")
        return
    lines = r.stdout.splitlines()
    if not check(r.returncode == 0 and len(lines) == 3, f"full disk: {r.returncode}: {r.stdout}"
                 f"{r.stderr}"):
        return
    with open(os.path.join(TMP, "disk-second.err")) as f:
        second = f.read()
    check(lines[0] == "second=1" and "No space left on device" in second,
          f"full disk: the run over the earlier output: {lines[0]}: {second}")
    check(lines[1] == "gather=0", f"full disk: the earlier output no longer gathers: {lines[1]}")
    with open(os.path.join(TMP, "disk-before.safetensors"), "rb") as f, \
            open(os.path.join(TMP, "disk-after.safetensors"), "rb") as g:
        check(f.read() == g.read(), "full disk: the earlier output changed")
    check(lines[2].split() == ["first.err", "out"], f"full disk: the tmpfs holds {lines[2]}")


def dead_rank(source, reference):
    out = tmp_path("dead", "out")
    os.makedirs(os.path.dirname(out))
    check(earlier_output(source, out) == reference, "dead rank: the earlier output")
    pids = tmp_path("dead.pids")
    launcher = launch_recording_pids(
        pids, f'reshard --in "{source}" --plan "{PLAN3}" --out "{out}" --memory-mib 1',
        nproc=2, launch_flags=("--timeout", "20", "--grace", "30"))
    victim = read_pid(os.path.join(pids, "1"), time.time() + 20)
    killed = False
    deadline = time.time() + 30
    while time.time() < deadline and launcher.poll() is None:
        if writing_file(victim, out):
            os.kill(victim, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.0005)
    _, stderr = launcher.communicate(timeout=60)
    if not check(killed, f"dead rank: rank 1 was never killed: {stderr}"):
        return
    check(launcher.returncode == 1 and "rank 1 killed by signal 9" in stderr,
          f"dead rank: exit {launcher.returncode}: {stderr}")
    check(gathered(out, "dead") == reference, "dead rank: the earlier output changed")
    check(new_dirs_beside(out) == [], f"dead rank: left beside it: {new_dirs_beside(out)}")
    replaced_cleanly(source, out, "dead rank")


def main():
    write_inputs(24)
    source = tmp_path("source")
    r = run(["shard", "--checkpoint", CK, "--plan", PLAN2, "--out", source, "--nproc", "2"])
    check(r.returncode == 0, f"the source shard directory: {r.stderr}")
    reference = earlier_output(source, tmp_path("reference"))
    ctrl_c(source, reference)
    dead_rank(source, reference)
    full_disk(source)
    finish("replace")


if __name__ == "__main__":
    main()
