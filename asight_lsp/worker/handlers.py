"""Method name -> handler(params, emit, off) for the worker process.

Each worker module that serves requests exposes a ``HANDLERS`` dict; they are merged here, so a
feature adds its module to ``MODULES`` and nothing else.  ``off``: the levers the request works
without, decided once per request by the request loop (``__main__._serve``: its run's, else the
environment's; ``tune_plan.params_levers``); a handler that builds a model's kernels passes them down,
and one called directly (a test) with ``off`` None decides them the same way.
"""
from __future__ import annotations

import importlib
import os
import time

from ..engine import wire
from .compat import tvm

MODULES = ["parse", "metaschedule", "measure", "extract", "tir_graphs", "relax_graphs", "generated_code",
           "model_import", "import_check", "torch_import", "model_export", "adopt", "onnx_compare", "userspace",
           "remeasure", "library",
           "candidate_runner"]   # each has HANDLERS


def ping(params: dict, emit=None, off=None) -> dict:
    from .sandbox import STATUS
    return {"pid": os.getpid(), "tvm": tvm.__version__, "threads": os.environ.get("TVM_NUM_THREADS"),
            "sandbox": STATUS.to_dict()}


def debug_sleep(params: dict, emit=None, off=None) -> dict:
    """Sleeps: lets tests and health checks exercise timeouts and crashes mid-request."""
    time.sleep(float(params.get("seconds", 1.0)))
    return {"slept": params.get("seconds", 1.0)}


def _collect() -> dict:
    handlers = {wire.PING: ping, wire.DEBUG_SLEEP: debug_sleep}
    for name in MODULES:
        try:
            module = importlib.import_module(f".{name}", __package__)
        except ModuleNotFoundError as err:
            if err.name == f"{__package__}.{name}":
                continue
            raise
        handlers.update(getattr(module, "HANDLERS", {}))
    return handlers


HANDLERS = _collect()
