"""One rank of wheel_test's checkpoint cases: the checkpoint commands as Python calls, in the venv
the wheel was installed into, with real torch and safetensors.

    python wheel_checkpoint_worker.py RANK WORLD STORE OUT.json

Every rank: shard_checkpoint of a checkpoint torch's safetensors wrote (plan as a dict), then
reshard_checkpoint of that output (plan as JSON text), a plan with an idle rule (its warning in
the report's log, and on stderr), errors on every rank (a format one rank
alone gets wrong; a bad plan). Rank 0 also: gather_checkpoint of both outputs (compared with the
original tensors), as Hugging Face files, into a path inside its input; spec_check of a spec and
of a plan's dry run, compared with what `python -m shardkit spec check` prints.
Writes OUT.json: {case: what this rank saw}; wheel_test compares ranks.
"""

import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file

import shardkit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # wheel_worker.py's copy beside it
from wheel_worker import error_of  # noqa: E402

RANK, WORLD, STORE, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
BASE = STORE[len("file://"):] + "-ckpt"
CK = BASE + "/model.safetensors"
ROWS = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0,
                                          "placements": {"ranks": "all"}}}]}
COLUMNS_TEXT = ('{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 1, '
                '"placements": {"ranks": "all"}}}]}')
results = {}


def original():
    return {"w": torch.arange(60, dtype=torch.float32).reshape(10, 6),
            "b": torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)}


def same_tensors(path):
    got, want = load_file(path), original()
    return sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)


def cli(*args):
    out = subprocess.run([sys.executable, "-I", "-m", "shardkit", *args], capture_output=True,
                         text=True, timeout=60)
    return out.returncode, out.stdout


def shard_and_reshard(comm):
    if RANK == 0:
        os.makedirs(BASE, exist_ok=True)
        save_file(original(), CK, metadata={"format": "pt"})
    comm.barrier()
    report = shardkit.shard_checkpoint(comm, CK, ROWS, BASE + "/rows", quiet=True)
    results["shard_report"] = [report.world_size, report.parameters, report.sharded,
                               report.replicated, report.written_by, len(report.ranks)]
    results["shard_summary"] = report.summary
    mine = load_file(report_file(report, BASE + "/rows"))
    results["shard_local"] = torch.equal(mine["w"] if "w" in mine else torch.empty(0),
                                         torch.chunk(original()["w"], WORLD, 0)[RANK])
    again = shardkit.reshard_checkpoint(comm, BASE + "/rows", COLUMNS_TEXT, BASE + "/columns",
                                        quiet=True)
    results["reshard_report"] = [again.written_by, again.in_world_size, again.sharded]
    idle = {"rules": ROWS["rules"] + [{"match": "nothing.*", "spec": ROWS["rules"][0]["spec"]}]}
    loud = shardkit.shard_checkpoint(comm, CK, idle, BASE + "/idle")  # warnings also on stderr
    results["idle_log"] = loud.log


def report_file(report, out):
    """This rank's file of a shard output, read back as torch tensors by safetensors."""
    return os.path.join(out, report.ranks[RANK].file)


def errors(comm):
    fmt = "bogus" if RANK == 3 else "shardkit"
    results["format_on_rank3"] = error_of(lambda: shardkit.shard_checkpoint(
        comm, CK, ROWS, BASE + "/bad", format=fmt, quiet=True))
    bad = {"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 5,
                                             "placements": {"ranks": "all"}}}]}
    results["bad_plan"] = error_of(lambda: shardkit.shard_checkpoint(
        comm, CK, bad, BASE + "/bad", quiet=True))
    comm.barrier()  # the group is still usable
    results["after_errors"] = True


def gathers():
    """Rank 0 only: whole checkpoints back from both outputs, and two outputs of other kinds."""
    report = shardkit.gather_checkpoint(BASE + "/rows", BASE + "/rows.safetensors", quiet=True)
    results["gather_rows"] = same_tensors(BASE + "/rows.safetensors")
    results["gather_summary"] = report.summary
    shardkit.gather_checkpoint(BASE + "/columns", BASE + "/columns.safetensors", quiet=True)
    results["gather_columns"] = same_tensors(BASE + "/columns.safetensors")
    hf = shardkit.gather_checkpoint(BASE + "/rows", BASE + "/hf", max_shard_size=100,
                                    quiet=True)
    results["gather_hf_files"] = [len(hf.files), os.path.basename(hf.index_path)]
    results["gather_inside"] = error_of(lambda: shardkit.gather_checkpoint(
        BASE + "/rows", BASE + "/rows/x.safetensors", quiet=True))


def spec_checks():
    """Rank 0 only: spec_check's text is what the CLI prints for the same input."""
    spec = {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}
    with open(BASE + "/spec.json", "w") as f:
        json.dump(spec, f)
    with open(BASE + "/plan.json", "w") as f:
        json.dump(ROWS, f)
    found = shardkit.spec_check(spec, shape=[10, 6], world_size=4)
    results["spec_shards"] = [[s.rank, list(s.offsets), list(s.sizes)] for s in found.shards]
    code, text = cli("spec", "check", BASE + "/spec.json", "--shape", "10,6", "--world", "4")
    results["spec_text_as_cli"] = code == 0 and text == found.text
    dry = shardkit.spec_check(BASE + "/plan.json", checkpoint=CK, world_size=4)
    code, text = cli("spec", "check", BASE + "/plan.json", "--checkpoint", CK, "--world", "4")
    results["dry_run_as_cli"] = (code == 0 and text == dry.text and dry.dry_run is not None and
                                 "rule" in dry.dry_run.columns)
    results["dry_run_no_world"] = error_of(lambda: shardkit.spec_check(ROWS, checkpoint=CK))


def main():
    comm = shardkit.init(rank=RANK, world_size=WORLD, store=STORE, timeout=30)
    shard_and_reshard(comm)
    errors(comm)
    if RANK == 0:
        gathers()
        spec_checks()
    comm.barrier()
    with open(OUT, "w") as f:
        json.dump(results, f)


main()
