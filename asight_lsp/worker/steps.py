"""A TVM error inside a step of a model's pipeline said as a user can act on it: which step, which
kernel where it can be found, TVM's reason in one line, and what to do (docs/models.md, "A lever TVM
refuses").  ``asight tune``, ``asight model``, ``asight export`` and ``--compare-onnx`` build through
``relax_pipeline.fuse`` and ``build_tuned``, which run inside ``step``; an error of asight's own (its
message already written for a user) passes through unchanged.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

from ..analysis.levers import reason_line as reason


class StepFailed(RuntimeError):
    """A TVM error in a named step (the message is one line)."""


def said(err: BaseException, first: str) -> str:
    """A failure in one line: a step's own message (already says what failed), else its type and ``first``."""
    return first if isinstance(err, StepFailed) else f"{type(err).__name__}: {first}"


def ours(err: BaseException) -> bool:
    """Whether asight raised ``err`` itself (its innermost frame is asight's code)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "/asight_lsp/" in tb.tb_frame.f_code.co_filename.replace("\\", "/")


@contextmanager
def step(name: str, todo: str, find_kernel: Callable[[], str | None] | None = None):
    """Run the block; a TVM error in it becomes ``StepFailed("<name> failed [in kernel K]: <reason>; <todo>")``."""
    try:
        yield
    except (MemoryError, KeyboardInterrupt, StepFailed):
        raise
    except Exception as err:  # noqa: BLE001 - said with its step; asight's own errors pass through
        if ours(err):
            raise
        kernel = None
        if find_kernel is not None:
            try:
                kernel = find_kernel()
            except Exception:  # noqa: BLE001 - the kernel is a help, not a requirement
                kernel = None
        where = f" in kernel {kernel}" if kernel else ""
        raise StepFailed(f"{name} failed{where}: {reason(err)}; {todo}") from err
