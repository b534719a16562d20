"""The public calls: init, shard_parameter, zeros, and the ShardedTensor they return."""

from __future__ import annotations

import datetime
import json
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core
from ._tensors import dtype_name, to_core, to_torch

Communicator = _core.Communicator
Spec = Union[dict, str]
Timeout = Union[float, datetime.timedelta, None]


def _seconds(timeout: Timeout) -> Optional[float]:
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return None if timeout is None else float(timeout)


def _spec_json(spec: Spec) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict):
        return json.dumps(spec)
    raise TypeError(f"spec: expected a dict or JSON text, got {type(spec).__name__}")


def init(backend: Optional[str] = None, *, rank: Optional[int] = None,
         world_size: Optional[int] = None, store: Optional[str] = None,
         timeout: Timeout = None, hostname: Optional[str] = None,
         ifname: Optional[str] = None, local_rank: Optional[int] = None) -> Communicator:
    """Connects this rank to the others and returns its Communicator.

    Without `rank` and `world_size`, the launcher that started the process says them
    (`shardkit launch`, torchrun, mpirun or srun), as SHARDKIT_STORE, SHARDKIT_BACKEND and
    SHARDKIT_TIMEOUT say the store, backend and deadline; arguments given here win. `backend`:
    "gloo" (built in; the default), or a plugin's name ("nccl", "ucx", "mpi"). `store`:
    "tcp://HOST:PORT" (served by rank 0 unless something serves it already) or "file://DIR".
    `timeout`: seconds (or a timedelta), the deadline of the rendezvous and of every call that
    does not give its own (default 60 s).

    Raises shardkit.Error: InvalidArgumentError for bad arguments; DeadlineExceededError naming
    the ranks that never joined; NotFoundError for an unknown backend.
    """
    return _core.connect(backend=backend, rank=rank, world_size=world_size, store=store,
                         timeout=_seconds(timeout), hostname=hostname, ifname=ifname,
                         local_rank=local_rank)


class Shard(NamedTuple):
    """One shard of a ShardedTensor: where it sits in the whole tensor and which rank holds it."""
    offsets: Tuple[int, ...]
    sizes: Tuple[int, ...]
    placement: str  # "rank:1/cpu"


class ShardedTensor:
    """A tensor cut into shards that live on different ranks (this rank holds `local_tensors()`).

    Every rank knows the whole layout (`shape`, `dtype`, `spec`, `shards`). The local tensors are
    views of shardkit's memory, kept alive while Python holds them: a write through one is what
    `gather` returns.
    """

    __slots__ = ("_core",)

    def __init__(self, core: _core.ShardedTensor) -> None:
        self._core = core

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._core.shape

    @property
    def dtype(self) -> str:
        """The dtype's PyTorch name ("bfloat16")."""
        return self._core.dtype

    @property
    def spec(self) -> dict:
        """The sharding spec, bound to this tensor's shape and world (canonical JSON as a dict)."""
        return json.loads(self._core.spec_json)

    @property
    def shards(self) -> List[Shard]:
        """Every rank's shards, in the spec's order."""
        return [Shard(*shard) for shard in self._core.shards]

    @property
    def local_indices(self) -> List[int]:
        """The positions in `shards` of this rank's shards."""
        return list(self._core.local_indices)

    def local_tensors(self) -> list:
        """This rank's shards as torch tensors (zero-copy views), in `local_indices` order."""
        return [to_torch(t) for t in self._core.local_tensors()]

    def gather(self, dst: int = 0, *, comm: Optional[Communicator] = None,
               timeout: Timeout = None):
        """Collective: the whole tensor (a torch tensor) on rank `dst`, None on the others.

        `comm`: the communicator to gather over (default: the one it was sharded over; a
        ShardedTensor from zeros() has none).
        """
        whole = self._core.gather(dst, comm, _seconds(timeout))
        return None if whole is None else to_torch(whole)

    def __repr__(self) -> str:
        return repr(self._core)


def shard_parameter(comm: Communicator, tensor: Any, spec: Spec, src_rank: int = 0, *,
                    name: str = "tensor", strategy: str = "scatter",
                    timeout: Timeout = None) -> ShardedTensor:
    """Collective: shards `tensor` from rank `src_rank` so that every rank keeps its chunks.

    `tensor`: the whole tensor on the source rank (torch, numpy or any DLPack producer); None
    or a meta tensor on the other ranks (they learn its shape and dtype from the source). `spec`:
    a sharding spec, as a dict or JSON text, e.g. {"type": "chunk", "dim": 0, "placements":
    {"ranks": "all"}}. Every rank checks that all agree on the spec, shape, dtype and source
    before any data moves. `strategy`: "scatter" (each rank receives only its chunks) or
    "broadcast". `name` names the tensor in errors.

    Raises shardkit.Error, the same on every rank for a problem of any rank (a spec that differs,
    a bad spec, a source given None): InvalidArgumentError; DeadlineExceededError when a rank
    does not take part within the deadline.
    """
    return ShardedTensor(_core.shard_parameter(comm, to_core(tensor), _spec_json(spec),
                                               src_rank, name, strategy, _seconds(timeout)))


def zeros(shape: Sequence[int], dtype: Any, spec: Spec, *, rank: int, world_size: int,
          device: str = "cpu") -> ShardedTensor:
    """Rank `rank`'s side of `spec` bound over `world_size` ranks, zero-filled, with no
    communication: what a weight-sync destination starts from. `dtype`: a torch dtype or a name
    ("BF16", "bfloat16")."""
    return ShardedTensor(_core.zeros(list(shape), dtype_name(dtype), _spec_json(spec), rank,
                                     world_size, device))
