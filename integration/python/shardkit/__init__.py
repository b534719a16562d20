"""shardkit: shard parameters across the ranks of a job, from Python.

    import shardkit
    comm = shardkit.init()                       # ranks from torchrun / shardkit launch / ...
    spec = {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}
    st = shardkit.shard_parameter(comm, tensor if comm.rank == 0 else None, spec)
    st.local_tensors()                           # this rank's chunks: torch views, no copies
    st.gather(dst=0)                             # the whole tensor on rank 0, None elsewhere
    shardkit.shard_checkpoint(comm, "model.safetensors", "plan.json", "shards")  # `shardkit shard`

Errors are shardkit.Error subclasses, one per status code (shardkit.InvalidArgumentError, ...),
the same on every rank for a cross-rank problem. `python -m shardkit ARGS` is the shardkit CLI.
Importing shardkit imports neither torch nor numpy.
"""

import os as _os

from . import _core

# The wheel's backend plugins (UCX, MPI, NCCL): found here with no environment variable.
_core.add_plugin_directory(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "lib",
                                         "shardkit"))
from ._api import Communicator, Shard, ShardedTensor, init, shard_parameter, zeros
from ._checkpoint import (GatherReport, Inspection, RankReport, RunReport, SpecCheck, SpecShard,
                          gather_checkpoint, inspect, reshard_checkpoint, shard_checkpoint,
                          spec_check)
from ._sync import SyncPlan, SyncReport, from_dtensor, plan_sync
from ._errors import (AbortedError, AlreadyExistsError, CancelledError, DataLossError,
                      DeadlineExceededError, Error, FailedPreconditionError, InternalError,
                      InvalidArgumentError, NotFoundError, OutOfRangeError,
                      PermissionDeniedError, ResourceExhaustedError, UnauthenticatedError,
                      UnavailableError, UnimplementedError, UnknownError)

__version__ = _core.__version__
build_id = _core.build_id

__all__ = [
    "Communicator", "Shard", "ShardedTensor", "init", "shard_parameter", "zeros",
    "SyncPlan", "SyncReport", "from_dtensor", "plan_sync", "Inspection", "inspect",
    "SpecCheck", "SpecShard", "spec_check", "RunReport", "RankReport", "shard_checkpoint",
    "reshard_checkpoint", "GatherReport", "gather_checkpoint",
    "Error", "AbortedError", "AlreadyExistsError", "CancelledError", "DataLossError",
    "DeadlineExceededError", "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "NotFoundError", "OutOfRangeError", "PermissionDeniedError", "ResourceExhaustedError",
    "UnauthenticatedError", "UnavailableError", "UnimplementedError", "UnknownError",
]
