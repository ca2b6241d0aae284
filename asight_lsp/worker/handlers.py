"""Method name -> handler(params, emit) for the worker process."""
from __future__ import annotations

import os
import time

from . import parse
from .compat import tvm


def ping(params: dict, emit=None) -> dict:
    return {"pid": os.getpid(), "tvm": tvm.__version__, "threads": os.environ.get("TVM_NUM_THREADS")}


def debug_sleep(params: dict, emit=None) -> dict:
    """Sleeps: lets tests and health checks exercise timeouts and crashes mid-request."""
    time.sleep(float(params.get("seconds", 1.0)))
    return {"slept": params.get("seconds", 1.0)}


HANDLERS = {
    "ping": ping,
    "check": parse.check,
    "debug.sleep": debug_sleep,
}
