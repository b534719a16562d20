"""Tensors in and out of the extension module, zero-copy through DLPack.

In: any DLPack producer (a torch tensor, a numpy array, a shardkit._core.Tensor); a torch meta
tensor becomes a tensor with shape and dtype but no data. Out: torch tensors sharing shardkit's
memory. DLPack 0.6 has no bool or float8 types: those cross as uint8 views of the same shape,
with their dtype named beside them, and are viewed back on the far side.
"""

from __future__ import annotations

import sys
from typing import Any

from . import _core

# What DLPack 0.6 cannot describe: crosses as uint8 (tensor_py.h).
_AS_UINT8 = frozenset({"bool", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                       "float8_e4m3fnuz", "float8_e5m2fnuz"})


def dtype_name(dtype: Any) -> str:
    """A dtype's name as shardkit reads it: a torch or numpy dtype, or a string ("BF16",
    "bfloat16", "torch.bfloat16")."""
    if isinstance(dtype, str):
        return dtype[len("torch."):] if dtype.startswith("torch.") else dtype
    name = getattr(dtype, "name", None)  # numpy
    if isinstance(name, str) and not str(dtype).startswith("torch."):
        return name
    return str(dtype).replace("torch.", "")


def _torch():
    return sys.modules.get("torch")


def to_core(value: Any) -> _core.Tensor | None:
    """A shardkit tensor sharing `value`'s memory (None stays None)."""
    if value is None or isinstance(value, _core.Tensor):
        return value
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return _core.Tensor.meta(tuple(value.shape), dtype_name(value.dtype))
        value = value.detach()
        name = dtype_name(value.dtype)
        if name in _AS_UINT8:
            return _core.Tensor.from_dlpack(value.view(torch.uint8).__dlpack__(), name)
        return _core.Tensor.from_dlpack(value.__dlpack__())
    if not hasattr(value, "__dlpack__"):
        raise TypeError(f"expected a tensor (torch, numpy or any DLPack producer) or None, "
                        f"got {type(value).__name__}")
    name = dtype_name(getattr(value, "dtype", ""))
    if name == "bool" and hasattr(value, "view"):  # numpy's bool_
        import numpy
        return _core.Tensor.from_dlpack(value.view(numpy.uint8).__dlpack__(), "bool")
    return _core.Tensor.from_dlpack(value.__dlpack__())


def to_torch(tensor: _core.Tensor):
    """A torch tensor sharing `tensor`'s memory, of its dtype."""
    import torch
    result = torch.from_dlpack(tensor)
    wanted = getattr(torch, tensor.dtype)
    return result if result.dtype == wanted else result.view(wanted)
