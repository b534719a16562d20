"""shardkit's exceptions: one class per status code of the C++ library (absl::StatusCode).

Every error the library raises is a `shardkit.Error`; its `.code` is the code's name as absl prints
it ("INVALID_ARGUMENT"), and its class the subclass for that code (`InvalidArgumentError`). A
cross-rank problem raises the same class with the same message on every rank. Two subclasses are
also the builtin a Python program would catch: `InvalidArgumentError` is a `ValueError`,
`DeadlineExceededError` a `TimeoutError`.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of shardkit's errors. `code`: the status code's name, e.g. "NOT_FOUND"."""

    code: str = "UNKNOWN"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class CancelledError(Error):
    code = "CANCELLED"


class UnknownError(Error):
    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    code = "INVALID_ARGUMENT"


class DeadlineExceededError(Error, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class NotFoundError(Error):
    code = "NOT_FOUND"


class AlreadyExistsError(Error):
    code = "ALREADY_EXISTS"


class PermissionDeniedError(Error):
    code = "PERMISSION_DENIED"


class ResourceExhaustedError(Error):
    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(Error):
    code = "FAILED_PRECONDITION"


class AbortedError(Error):
    code = "ABORTED"


class OutOfRangeError(Error):
    code = "OUT_OF_RANGE"


class UnimplementedError(Error):
    code = "UNIMPLEMENTED"


class InternalError(Error):
    code = "INTERNAL"


class UnavailableError(Error):
    code = "UNAVAILABLE"


class DataLossError(Error):
    code = "DATA_LOSS"


class UnauthenticatedError(Error):
    code = "UNAUTHENTICATED"


ERRORS = (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
          NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
          FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
          InternalError, UnavailableError, DataLossError, UnauthenticatedError)
_BY_CODE = {error.code: error for error in ERRORS}


def error_for(code: str, message: str) -> Error:
    """The exception for a status code's name and message (what the extension module raises)."""
    return _BY_CODE.get(code, Error)(message, code)
