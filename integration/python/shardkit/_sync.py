"""DTensors in, and weight sync: from_dtensor, plan_sync and SyncPlan."""

from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from . import _core
from ._api import Communicator, ShardedTensor, Timeout, _seconds
from ._errors import InvalidArgumentError
from ._tensors import dtype_name, to_core


def _is_dtensor(value: Any) -> bool:
    return type(value).__name__ == "DTensor" and hasattr(value, "placements")


def _dtensor_layout(dtensor: Any):
    """(spec dict or None for Replicate, mesh ranks) of a DTensor on a 1-D mesh."""
    mesh = dtensor.device_mesh
    if mesh.ndim != 1 or len(dtensor.placements) != 1:
        raise InvalidArgumentError(f"from_dtensor: a DTensor on a 1-D mesh only; this one's mesh "
                                   f"has {mesh.ndim} dimensions")
    placement = dtensor.placements[0]
    ranks = [int(r) for r in mesh.mesh.flatten().tolist()]
    if placement.is_replicate():
        return None, ranks
    if placement.is_shard():
        dim = placement.dim if placement.dim >= 0 else placement.dim + dtensor.ndim
        return {"type": "chunk", "dim": dim,
                "placements": [f"rank:{r}" for r in ranks]}, ranks
    raise InvalidArgumentError(f"from_dtensor: placement {placement} is neither Shard(d) nor "
                               "Replicate")


def from_dtensor(comm: Communicator, dtensor: Any) -> ShardedTensor:
    """A ShardedTensor sharing the memory of `dtensor`'s local shard (no copy, no communication).

    The DTensor must live on a 1-D mesh whose ranks are `comm`'s (as under one torchrun), with
    placement Shard(d): the spec is the chunk spec over the mesh's ranks (torch.chunk's split,
    which DTensor uses). A Replicate DTensor is a plain tensor for shardkit: pass it (or its
    to_local()) to plan_sync as a replicated parameter.
    """
    spec, _ = _dtensor_layout(dtensor)
    if spec is None:
        raise InvalidArgumentError("from_dtensor: a Replicate DTensor is not sharded: give "
                                   "plan_sync the DTensor itself (replicated on its group)")
    local = dtensor.to_local()
    return ShardedTensor(_core.from_local(list(dtensor.shape), dtype_name(dtensor.dtype),
                                          json.dumps(spec), comm.rank, comm.world_size,
                                          [to_core(local)], comm))


def _side(comm: Communicator, side: Optional[Dict[str, Any]], group: Sequence[int]):
    """A side's parameters as the extension takes them: [(name, core tensor)], or None."""
    if side is None:
        return None
    if not isinstance(side, dict):
        raise TypeError(f"expected a dict of name -> ShardedTensor, DTensor or tensor, or None; "
                        f"got {type(side).__name__}")
    entries = []
    for name, value in side.items():
        if isinstance(value, ShardedTensor):
            entries.append((name, value._core))
        elif _is_dtensor(value):
            entries.append((name, _from_dtensor_in_group(comm, value, group)))
        else:
            entries.append((name, to_core(value)))
    return entries


def _from_dtensor_in_group(comm, dtensor, group):
    """A DTensor as one side's parameter: placement ranks are positions in the side's group."""
    spec, ranks = _dtensor_layout(dtensor)
    if spec is None:
        return to_core(dtensor.to_local())
    group = list(group) if group else list(range(comm.world_size))
    if ranks != group:
        raise InvalidArgumentError(f"plan_sync: a DTensor's mesh ranks {ranks} are not its "
                                   f"side's ranks {group}")
    spec["placements"] = [f"rank:{i}" for i in range(len(ranks))]
    return _core.from_local(list(dtensor.shape), dtype_name(dtensor.dtype), json.dumps(spec),
                            group.index(comm.rank), len(group), [to_core(dtensor.to_local())],
                            comm)


class SyncReport(NamedTuple):
    """What one sync did on this rank."""
    updated: List[str]       # this rank's destination parameters updated (all, on success)
    bytes_received: int      # from other ranks
    bytes_copied: int        # local pieces (overlapping groups)
    pack_seconds: float
    unpack_seconds: float


class SyncPlan:
    """A weight sync planned once (plan_sync); sync() moves the bytes, as often as needed."""

    __slots__ = ("_core", "_comm", "_groups")

    def __init__(self, core, comm, groups) -> None:
        self._core, self._comm, self._groups = core, comm, groups

    @property
    def fingerprint(self) -> str:
        return self._core.fingerprint

    @property
    def names(self) -> List[str]:
        return list(self._core.names)

    @property
    def rounds(self) -> int:
        return self._core.rounds

    def sync(self, source: Optional[Dict[str, Any]], destination: Optional[Dict[str, Any]], *,
             verify: bool = False, timeout: Timeout = None) -> SyncReport:
        """Collective over every rank of the plan's communicator: the destination tensors are
        updated in place from the source's. The same dicts (or tensors of the same shapes) as
        plan_sync saw. `verify`: compare a SHA-256 of every piece between sender and receiver.
        Raises DataLossError naming the first piece that differs."""
        report = self._core.sync(_side(self._comm, source, self._groups[0]),
                                 _side(self._comm, destination, self._groups[1]), verify,
                                 _seconds(timeout))
        return SyncReport(**report)


def plan_sync(comm: Communicator, source: Optional[Dict[str, Any]],
              destination: Optional[Dict[str, Any]], *, source_ranks: Sequence[int] = (),
              destination_ranks: Sequence[int] = (), memory_bytes: Optional[int] = None,
              timeout: Timeout = None) -> SyncPlan:
    """Collective over every rank of `comm`: plans moving `source`'s parameters (on the ranks
    `source_ranks`) into `destination`'s (on `destination_ranks`; empty: every rank).

    Each side is a dict name -> ShardedTensor, DTensor or tensor (replicated on the side) on the
    side's members, None on the other ranks. A ShardedTensor's placement rank i is the side's i-th
    rank (make a destination with zeros(..., rank=i, world_size=len(destination_ranks))); a
    DTensor's mesh must be its side's ranks. Every rank checks the same things and raises the
    same InvalidArgumentError for a mismatch (names, shapes, dtypes, groups). `memory_bytes`:
    staging per rank (default 64 MiB).
    """
    groups = (list(source_ranks), list(destination_ranks))
    kwargs = {} if memory_bytes is None else {"memory_bytes": int(memory_bytes)}
    core = _core.plan_sync(comm, _side(comm, source, groups[0]),
                           _side(comm, destination, groups[1]), groups[0], groups[1],
                           timeout=_seconds(timeout), **kwargs)
    return SyncPlan(core, comm, groups)
