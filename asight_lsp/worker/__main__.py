"""``python -m asight_lsp.worker [--unsandboxed]``: serve msgpack-framed requests on stdin/stdout until EOF.

The worker imports TVM, then sets up its OS sandbox and tests it from inside (``worker/sandbox.py``,
docs/sandbox.md) and tells the client in a first frame ``{"id": 0, "hello": {"pid", "sandbox"}}``
whether it holds, before it reads the first request.  A worker whose sandbox is not active answers
every request but ``ping`` with ``SandboxUnavailable`` (files are then outlined statically only).  ``--unsandboxed`` is for trusted requests that need files and
processes (``asight profile --cachegrind``); the core asks for it explicitly (``WorkerClient``).
"""
from __future__ import annotations

import os
import sys
import traceback


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this worker when the process that started it dies (else a CPU bomb keeps computing after
    the CLI gets SIGTERM or the server SIGKILL).  Set before the sandbox (prctl is not on
    its allow-list); the kernel delivers it even while the main thread is deep in C code holding the GIL,
    where no watchdog thread could run.  ``ASIGHT_WORKER_PARENT``: the client's pid (``engine/client.py``),
    to catch a parent that died before the signal was armed."""
    import ctypes
    import signal
    parent = os.environ.pop("ASIGHT_WORKER_PARENT", None)
    if parent is None:
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # TVM and user prints must never corrupt the frame stream
    from ..engine import wire
    from ..engine.framing import FrameError, read_frame, write_frame
    from . import sandbox
    from .handlers import HANDLERS   # imports TVM (and everything a request needs) before the filter
    from . import lever_guard, steps, tune_plan  # noqa: F401  (every request goes through them: loaded before the filter too)
    from .namespace_guard import NamespaceGuard, after_request

    if "--unsandboxed" not in argv:
        os.environ["TVM_BIND_THREADS"] = "0"   # the sandbox refuses pinning another thread (sandbox_rules.OWN_PID_ONLY)
    if "--unsandboxed" in argv:      # export, import, cachegrind: no sandbox, but a memory cap
        sandbox.limit_memory(2.0)
    status = sandbox.skip("started with --unsandboxed for a trusted request") if "--unsandboxed" in argv \
        else sandbox.apply()
    refusal = _refusal(status)
    if not status.active and status.requested:
        print(f"asight worker: running WITHOUT its OS sandbox: {status.reason}", file=sys.stderr, flush=True)
    write_frame(stdout, {"id": 0, "hello": {"pid": os.getpid(), "sandbox": status.to_dict()}})
    guard = NamespaceGuard() if status.active else None   # files are evaluated: no file changes the next
    while True:
        try:
            request = read_frame(stdin)
        except FrameError:
            return 0
        rid, method = request.get("id"), request.get("method")
        if method == wire.SHUTDOWN:
            return 0
        handler = HANDLERS.get(method)
        if handler is None or (refusal and method != wire.PING):
            message = refusal if handler is not None else f"unknown method {method!r}"
            kind = "SandboxUnavailable" if handler is not None else "UnknownMethod"
            write_frame(stdout, {"id": rid, "error": {"type": kind, "message": message}})
            continue
        if status.active:
            sandbox.cpu_budget(method)
        _serve(handler, rid, request.get("params") or {}, stdout, write_frame)
        after_request(guard)


def _serve(handler, rid, params: dict, stdout, write_frame) -> None:
    from . import sandbox
    def emit(event: dict) -> None:
        write_frame(stdout, {"id": rid, "event": event})

    try:
        from . import lever_guard
        lever_guard.start()
        result = handler(params, emit, _levers(params))
        if isinstance(result, dict) and lever_guard.refused():   # the levers TVM refused while answering
            result = {**result, "levers_refused": lever_guard.refused()}
        write_frame(stdout, {"id": rid, "result": result})
    except Exception as err:  # every failure becomes a one-line error for the caller
        traceback.print_exc(file=sys.stderr)
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        message = sandbox.memory_message(err) or (None if sandbox.STATUS.requested else
                                                  sandbox.over_allowance(err, 2.0)) or message
        write_frame(stdout, {"id": rid, "error": {"type": type(err).__name__, "message": message}})


def _levers(params: dict) -> frozenset[str] | None:
    """The levers a request works without, decided once (``tune_plan.params_levers``): its run's
    (``run_dir``), else the environment's.  An ``ASIGHT_LEVERS_OFF`` typo fails a request on a run
    here, and any other only where its handler needs the levers (None: it decides them, and fails)."""
    from .tune_plan import params_levers
    try:
        return params_levers(params)
    except ValueError:
        if isinstance(params.get("run_dir"), str):
            raise
        return None


def _refusal(status) -> str | None:
    """The one-line error every request gets when the sandbox was asked for and is not active."""
    if status.active or not status.requested:
        return None
    return f"TVM does not evaluate this file: the worker's OS sandbox is not active ({status.reason})"


if __name__ == "__main__":
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))
    sys.exit(main())
