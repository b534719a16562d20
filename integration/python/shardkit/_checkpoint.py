"""The checkpoint commands as calls: `inspect`, `spec check`, `shard`, `reshard` and `gather`.

Each returns what the CLI prints, as data, with the CLI's text beside it (`.text` or `.summary`);
warnings and progress lines go to stderr as the CLI writes them (unless `quiet=True`) and come
back in `.log`. Messages are the library's, the same as the CLI's (they name the CLI's flags,
which are these functions' arguments: `--fp8-block` is `fp8_block=`).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core
from ._api import Communicator, Timeout, _seconds
from ._errors import error_for

# A spec or plan: a dict, JSON text (a str beginning with "{"), or the path of a JSON file.
JsonInput = Union[dict, str, os.PathLike]
PathLike = Union[str, os.PathLike]

DEFAULT_MEMORY_BYTES: int = _core.DEFAULT_MEMORY_BYTES  # 512 MiB, as the CLI's --memory-mib
DEFAULT_FP8_BLOCK: int = _core.DEFAULT_FP8_BLOCK        # 128, as --fp8-block


class Inspection(NamedTuple):
    """What `shardkit inspect PATH` prints, as data: the table (`columns`, `rows`), then the
    facts of the whole, the metadata, a Hugging Face index's files, and the warnings the CLI
    writes to stderr."""
    kind: str                       # "checkpoint", "shard directory" or "dcp checkpoint"
    columns: List[str]              # e.g. ["name", "dtype", "shape", "bytes"]
    rows: List[List[str]]           # one per tensor (a shard directory's: per parameter)
    facts: List[Tuple[str, str]]    # e.g. ("world_size", "4")
    metadata: Dict[str, str]
    files: List[str]
    warnings: List[str]

    def records(self) -> List[Dict[str, str]]:
        """The rows as dicts keyed by column."""
        return [dict(zip(self.columns, row)) for row in self.rows]


def _inspection(found: dict) -> Inspection:
    return Inspection(found["kind"], list(found["columns"]), [list(r) for r in found["rows"]],
                      [tuple(f) for f in found["facts"]], dict(found["metadata"]),
                      list(found["files"]), list(found["warnings"]))


def inspect(path: PathLike) -> Inspection:
    """`shardkit inspect PATH`: what a safetensors file, a Hugging Face checkpoint, a shard
    directory or a PyTorch DCP checkpoint holds (every file checked as the commands check it).
    Raises NotFoundError for a missing path, InvalidArgumentError for malformed content, naming
    the file."""
    return _inspection(_core.inspect(os.fspath(path)))


class SpecShard(NamedTuple):
    """One shard of a spec bound to a shape (a row of `spec check --shape`'s table)."""
    rank: int
    offsets: Tuple[int, ...]
    sizes: Tuple[int, ...]


class SpecCheck(NamedTuple):
    """What `shardkit spec check` finds. `text` is what the CLI prints on stdout."""
    plan: bool                         # the input is a plan (an object with "rules")
    canonical: str                     # canonical JSON (bound to `shape` when given); "" for a
    fingerprint: str                   # dry run; "sha256:..." of `canonical`
    shards: Optional[List[SpecShard]]  # with `shape`: the shards, in spec order
    dry_run: Optional[Inspection]      # with `checkpoint`: the table `inspect` would print of
                                       # the output, with each parameter's rule
    warnings: List[str]                # with `checkpoint`: the warnings `shard` would print
    text: str


def _json_input(value: JsonInput, what: str) -> Tuple[str, str]:
    """(the name messages give it, its JSON text or "" to read the file at that name)."""
    if isinstance(value, dict):
        return what, json.dumps(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value), ""
    if isinstance(value, str):
        return (what, value) if value.lstrip().startswith("{") else (value, "")
    raise TypeError(f"{what}: expected a dict, JSON text or a path, got {type(value).__name__}")


def spec_check(spec: JsonInput, *, shape: Optional[Sequence[int]] = None,
               world_size: Optional[int] = None, checkpoint: Optional[PathLike] = None,
               strict: bool = False, allow_replicated_only: bool = False,
               fp8_block: int = DEFAULT_FP8_BLOCK,
               allow_misaligned_scales: bool = False) -> SpecCheck:
    """`shardkit spec check`: validates a spec or a plan and returns its canonical form and
    fingerprint; with `shape`, a spec bound to that shape and its shards; with `world_size`, its
    ranks checked ({"ranks": "all"} expanded). With `checkpoint` (and `world_size`), the dry run
    of `shard_checkpoint` for a plan: what the output would hold, nothing written; `strict`,
    `allow_replicated_only`, `fp8_block` and `allow_misaligned_scales` are `shard`'s.
    Raises InvalidArgumentError naming the JSON path for what `shard` would refuse."""
    path, text = _json_input(spec, "spec")
    found = _core.spec_check(path, text, None if shape is None else [int(d) for d in shape],
                             world_size, "" if checkpoint is None else os.fspath(checkpoint),
                             strict, allow_replicated_only, fp8_block, allow_misaligned_scales)
    shards = found["shards"]
    return SpecCheck(found["plan"], found["canonical"], found["fingerprint"],
                     None if shards is None else
                     [SpecShard(r, tuple(o), tuple(s)) for r, o, s in shards],
                     None if found["dry_run"] is None else _inspection(found["dry_run"]),
                     list(found["warnings"]), found["text"])


class RankReport(NamedTuple):
    """One rank of a shard or reshard run (a row of the CLI's summary table)."""
    file: str           # its file in the output, rank-RRRRR.safetensors or __R_0.distcp
    tensors: int
    bytes_read: int     # from the checkpoint (or the old shard directory's files)
    files_read: int     # reshard: the old rank files it read from
    bytes_written: int
    peak_rss: int       # bytes
    rss_growth: int     # bytes, while the data moved


class RunReport(NamedTuple):
    """What `shard_checkpoint` or `reshard_checkpoint` did, alike on every rank. `summary` is
    the table `shardkit shard` / `reshard` prints (the source rank prints it there)."""
    written_by: str     # "scatter", "broadcast", "direct" or "reshard"
    src_rank: int
    world_size: int
    in_dir: str
    in_world_size: int
    parameters: int
    sharded: int
    replicated: int
    moved_bytes: int
    rounds: int
    memory_bytes: int
    plan_seconds: float
    stream_seconds: float
    total_seconds: float
    ranks: List[RankReport]
    summary: str
    log: List[str]      # the warnings (and progress lines) this rank wrote


class GatherReport(NamedTuple):
    """What `gather_checkpoint` wrote. `summary` is the line `shardkit gather` prints."""
    parameters: int
    bytes: int
    rank_files: int     # the input's files
    input_kind: str     # "rank files" or ".distcp files"
    out: str
    files: List[str]    # the data files written
    index_path: str     # a Hugging Face or DCP output's index, else ""
    seconds: float
    peak_rss: int
    summary: str
    log: List[str]


def _run_args(plan: JsonInput, out: PathLike, format: str, memory_bytes: int, fp8_block: int,
              allow_misaligned_scales: bool, strict: bool, allow_replicated_only: bool,
              progress: bool, quiet: bool, timeout: Timeout) -> "_core.RunArgs":
    args = _core.RunArgs()
    args.plan_path, args.plan_json = _json_input(plan, "plan")
    args.out = os.fspath(out)
    args.format = format
    args.memory_bytes = int(memory_bytes)
    args.fp8_block = int(fp8_block)
    args.allow_misaligned_scales = bool(allow_misaligned_scales)
    args.strict = bool(strict)
    args.allow_replicated_only = bool(allow_replicated_only)
    args.progress = bool(progress)
    args.echo = not quiet
    args.timeout = _seconds(timeout)
    return args


def _run_report(found: dict) -> RunReport:
    ranks = [RankReport(**rank) for rank in found["ranks"]]
    fields = {k: found[k] for k in RunReport._fields if k not in ("ranks", "log")}
    return RunReport(**{**fields, "ranks": ranks, "log": list(found["log"])})


def shard_checkpoint(comm: Communicator, checkpoint: PathLike, plan: JsonInput, out: PathLike,
                     *, src_rank: Optional[int] = None, strategy: Optional[str] = None,
                     format: str = "shardkit", memory_bytes: int = DEFAULT_MEMORY_BYTES,
                     fp8_block: int = DEFAULT_FP8_BLOCK, allow_misaligned_scales: bool = False,
                     strict: bool = False, allow_replicated_only: bool = False,
                     progress: bool = False, quiet: bool = False,
                     timeout: Timeout = None) -> RunReport:
    """`shardkit shard`, called by every rank of `comm`: each rank writes its shards of
    `checkpoint` (a .safetensors file, a Hugging Face index or a directory holding one) into
    `out` (rank-RRRRR.safetensors and index.json; `format="dcp"`: a PyTorch DCP checkpoint), as
    `plan` (a dict, JSON text or a file) lays them out. `src_rank` and `strategy` ("scatter",
    "broadcast", "direct") override the plan's. An earlier output in `out` stays whole until the
    new one replaces it. `timeout`: the deadline of the whole call (default: the
    communicator's). Raises the same error on every rank for bad input or a rank that fails."""
    args = _run_args(plan, out, format, memory_bytes, fp8_block, allow_misaligned_scales, strict,
                     allow_replicated_only, progress, quiet, timeout)
    return _run_report(_core.shard_checkpoint(comm, os.fspath(checkpoint), args, src_rank,
                                              strategy))


def reshard_checkpoint(comm: Communicator, in_dir: PathLike, plan: JsonInput, out: PathLike, *,
                       include: Sequence[str] = (), exclude: Sequence[str] = (),
                       format: str = "shardkit", memory_bytes: int = DEFAULT_MEMORY_BYTES,
                       fp8_block: int = DEFAULT_FP8_BLOCK,
                       allow_misaligned_scales: bool = False, strict: bool = False,
                       allow_replicated_only: bool = False, progress: bool = False,
                       quiet: bool = False, timeout: Timeout = None) -> RunReport:
    """`shardkit reshard`, called by every rank of `comm`: the shard directory or DCP checkpoint
    `in_dir` (read by every rank at this path) laid out anew as `plan` says, for `comm`'s world,
    into `out` (outside `in_dir`). `include`/`exclude`: glob patterns of the tensors to keep.
    Otherwise as `shard_checkpoint`."""
    args = _run_args(plan, out, format, memory_bytes, fp8_block, allow_misaligned_scales, strict,
                     allow_replicated_only, progress, quiet, timeout)
    return _run_report(_core.reshard_checkpoint(comm, os.fspath(in_dir), args, list(include),
                                                list(exclude)))


def gather_checkpoint(in_dir: PathLike, out: PathLike, *,
                      max_shard_size: Union[int, str, None] = None, format: str = "shardkit",
                      include: Sequence[str] = (), exclude: Sequence[str] = (),
                      strip_prefix: str = "", strict: bool = False,
                      memory_bytes: int = DEFAULT_MEMORY_BYTES, progress: bool = False,
                      quiet: bool = False) -> GatherReport:
    """`shardkit gather`, in this process (no ranks): the whole checkpoint from a shard
    directory or DCP checkpoint `in_dir`, as one safetensors file `out`; with `max_shard_size`
    (bytes, or "500MB", "2GiB") a Hugging Face checkpoint in directory `out`; with
    `format="dcp"` a DCP checkpoint of one rank in directory `out`. `include`/`exclude`/
    `strip_prefix` select and rename tensors. Written durably: `out` is the old file or the
    complete new one at every instant."""
    max_bytes = 0
    if max_shard_size is not None:
        max_bytes = (_core.parse_byte_size(max_shard_size) if isinstance(max_shard_size, str)
                     else int(max_shard_size))
        if max_bytes <= 0:
            raise error_for("INVALID_ARGUMENT",
                            f"max_shard_size must be positive, got {max_shard_size!r}")
    found = _core.gather_checkpoint(os.fspath(in_dir), os.fspath(out), max_bytes, format,
                                    list(include), list(exclude), strip_prefix, strict,
                                    int(memory_bytes), progress, not quiet)
    return GatherReport(**{**found, "files": list(found["files"]), "log": list(found["log"])})
