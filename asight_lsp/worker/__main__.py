"""``python -m asight_lsp.worker``: serve msgpack-framed requests on stdin/stdout until EOF."""
from __future__ import annotations

import os
import sys
import traceback


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # TVM and user prints must never corrupt the frame stream
    from ..engine import wire
    from ..engine.framing import FrameError, read_frame, write_frame
    from .handlers import HANDLERS

    while True:
        try:
            request = read_frame(stdin)
        except FrameError:
            return 0
        rid, method = request.get("id"), request.get("method")
        if method == wire.SHUTDOWN:
            return 0
        handler = HANDLERS.get(method)
        if handler is None:
            write_frame(stdout, {"id": rid, "error": {"type": "UnknownMethod", "message": f"unknown method {method!r}"}})
            continue

        def emit(event: dict, _rid=rid) -> None:
            write_frame(stdout, {"id": _rid, "event": event})

        try:
            result = handler(request.get("params") or {}, emit)
            write_frame(stdout, {"id": rid, "result": result})
        except Exception as err:  # every failure becomes a one-line error for the caller
            traceback.print_exc(file=sys.stderr)
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            write_frame(stdout, {"id": rid, "error": {"type": type(err).__name__, "message": message}})


if __name__ == "__main__":
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))
    sys.exit(main())
