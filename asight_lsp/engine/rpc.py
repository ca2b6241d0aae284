"""A TVM RPC tracker's address (``HOST:PORT:KEY``) and whether it answers (no TVM): one reading for
the request's check before a run is made (``services/tuning.check_rpc``) and the tuning job's runner
(``worker/metaschedule.rpc_servers``)."""
from __future__ import annotations

import socket


def parse_rpc(spec: str) -> tuple[str, int, str]:
    """``HOST:PORT:KEY`` -> (host, port, key); the key may itself contain colons.  ValueError (one line)."""
    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not 0 < int(parts[1]) < 65536 or not parts[2]:
        raise ValueError(f"--rpc expects HOST:PORT:KEY of a TVM RPC tracker (got '{spec}')")
    return parts[0], int(parts[1]), parts[2]


def reach_tracker(host: str, port: int, timeout: float = 5.0) -> None:
    """ConnectionError (one line) when nothing answers at ``host:port`` (TVM's own connect retries
    for 60 s; a refused port should fail at once)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        raise ConnectionError(f"cannot reach the RPC tracker at {host}:{port}: {why}") from None
