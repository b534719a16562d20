"""The checkpoint commands as calls (so far: inspect), returning what the CLI prints as data."""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Tuple, Union

from . import _core


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


def inspect(path: Union[str, os.PathLike]) -> Inspection:
    """`shardkit inspect PATH`: what a safetensors file, a Hugging Face checkpoint, a shard
    directory or a PyTorch DCP checkpoint holds (every file checked as the commands check it).
    Raises NotFoundError for a missing path, InvalidArgumentError for malformed content, naming
    the file."""
    found = _core.inspect(os.fspath(path))
    return Inspection(found["kind"], list(found["columns"]), [list(r) for r in found["rows"]],
                      [tuple(f) for f in found["facts"]], dict(found["metadata"]),
                      list(found["files"]), list(found["warnings"]))
