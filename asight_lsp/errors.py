"""Errors the core reports to users: each carries a one-line message, never a traceback."""
from __future__ import annotations


class AsightError(Exception):
    """A problem with what the user asked for (bad argument, unknown function, ...): CLI exit 2."""


class InputError(AsightError):
    """The file itself has errors (syntax, refused by the safety gate): the CLI exits 1."""


class WorkerError(AsightError):
    """The TVM worker answered a request with an error."""

    def __init__(self, message: str, error_type: str = "WorkerError"):
        super().__init__(message)
        self.error_type = error_type


class WorkerCrashed(WorkerError):
    """The TVM worker died while handling a request; it is restarted for the next one."""


class WorkerTimeout(WorkerError):
    """The TVM worker did not answer in time; it was killed and is restarted for the next one."""
