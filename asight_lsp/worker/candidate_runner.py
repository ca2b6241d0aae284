"""MetaSchedule's runner on the CPU, with every candidate run by a sandboxed worker (docs/sandbox.md).

A candidate is native code that the file's schedule made, and TVM does not bound-check its stores:
a kernel can corrupt the memory of the process that runs it (e.g. write through a pointer forged from
an input).  MetaSchedule's ``LocalRunner`` ran candidates in a pool process that the
OS sandbox contained, but it sent each result back *pickled*, and the unsandboxed tuning job
unpickled it: a runner taken over by its candidate could run anything in the job.  Here candidates
run in a sandboxed worker that answers over the worker pipe, whose frames are msgpack data: a
taken-over worker can only send wrong numbers, which ``costs_of`` checks.

* ``SandboxedRunner``: the ``PyRunner`` the tuning job uses on the CPU (``metaschedule.make_runner``).
  Results and error texts match ``LocalRunner``'s, so the failure groups read the same.
* ``run_candidate``: the worker's handler (``wire.RUN_CANDIDATE``); it runs only in a sandboxed worker.
"""
from __future__ import annotations

import atexit
import math
import re
import signal

from ..engine import wire
from ..errors import WorkerCrashed, WorkerError, WorkerTimeout
from .compat import derived_object, ms, tvm

TIMEOUT_TEXT = "LocalRunner: Timeout, killed after {seconds:g} seconds\n"
ERROR_TEXT = "LocalRunner: An exception occurred\n{error}"


@derived_object
class SandboxedRunner(ms.runner.PyRunner):
    """Runs each candidate with ``wire.RUN_CANDIDATE`` in one sandboxed worker (restarted after a
    crash or a timeout).  MetaSchedule's task scheduler removes each candidate's folder after."""

    def __init__(self, timeout_sec: float = 30.0) -> None:
        super().__init__()
        self.timeout_sec = timeout_sec
        self._worker = None

    def run(self, runner_inputs: list) -> list:
        return [self._run_one(item) for item in runner_inputs]

    def _run_one(self, item):
        LocalRunnerFuture = ms.runner.local_runner.LocalRunnerFuture
        params = {"artifact": item.artifact_path, "device": item.device_type,
                  "args": [info.as_json() for info in item.args_info]}
        try:
            reply = self.worker().request(wire.RUN_CANDIDATE, params, timeout=self.timeout_sec + 30.0)
            return LocalRunnerFuture(res=costs_of(reply))
        except WorkerTimeout:
            return LocalRunnerFuture(error_message=TIMEOUT_TEXT.format(seconds=self.timeout_sec))
        except WorkerCrashed as err:
            return LocalRunnerFuture(error_message=ERROR_TEXT.format(error=crash_text(str(err))))
        except (WorkerError, ValueError) as err:
            return LocalRunnerFuture(error_message=ERROR_TEXT.format(error=err))

    def worker(self):
        from ..engine.client import WorkerClient
        if self._worker is None:
            self._worker = WorkerClient(default_timeout=self.timeout_sec + 30.0)
            atexit.register(self.close)       # MetaSchedule never closes a runner
        return self._worker

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


def crash_text(message: str) -> str:
    """``the candidate crashed its runner (SIGSEGV)`` from the worker client's crash message."""
    found = re.search(r"\(exit code (-?\d+)\)", message)
    code = int(found.group(1)) if found else None
    if code is not None and code < 0:
        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = f"signal {-code}"
    else:
        how = f"exit code {code}" if code is not None else "no exit code"
    return f"the candidate crashed its sandboxed runner process ({how}; TVM does not bound-check stores)"


def costs_of(reply) -> list[float]:
    """The worker's answer as run times in seconds: a non-empty list of finite positive numbers
    (the worker ran the candidate's code; its answer is data to check, never to trust)."""
    costs = reply.get("costs") if isinstance(reply, dict) else None
    if not isinstance(costs, list) or not costs or len(costs) > 10_000:
        raise ValueError("the sandboxed runner sent no run times")
    values = [float(c) for c in costs if isinstance(c, (int, float)) and not isinstance(c, bool)]
    if len(values) != len(costs) or not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError("the sandboxed runner sent run times that are not positive numbers")
    return values


def run_candidate(params: dict, emit=None, off=None) -> dict:
    """Load one built candidate, time it as ``LocalRunner`` does (``metaschedule.evaluator_config``,
    ``inputs.runner_arguments``), return ``{"costs": [seconds, ...]}``.  Only in a sandboxed worker."""
    from . import sandbox
    from .inputs import runner_arguments
    from .metaschedule import evaluator_config
    if not sandbox.STATUS.active:
        raise PermissionError("candidates run only in a sandboxed worker")
    args = params.get("args")
    if not isinstance(args, list) or not all(isinstance(a, list) and len(a) == 3 and a[0] == "TENSOR" for a in args):
        raise ValueError("run_candidate needs args as [['TENSOR', dtype, shape], ...]")
    module = tvm.runtime.load_module(str(params["artifact"]))
    device = tvm.runtime.device(str(params.get("device") or "cpu"), 0)
    repeated = runner_arguments(device, args, 1)
    costs = ms.runner.utils.run_evaluator_common(module, device, evaluator_config(), repeated)
    return {"costs": [float(c) for c in costs]}


HANDLERS = {wire.RUN_CANDIDATE: run_candidate}
