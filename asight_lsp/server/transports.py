"""The network transports (``asight serve --tcp`` / ``--ws``): one client per session, and only the
client that knows the session's secret.

Any local program can open a socket on 127.0.0.1 (a web page among them, through ``fetch`` or a
websocket; another user of the machine), so a network session begins only when its first message is
``initialize`` carrying the session token in ``initializationOptions.sessionToken`` (or under
``"asight"``).  The token is ``$ASIGHT_LSP_TOKEN`` when the launcher chose one, else made at start and
written to a file only this user can read (``token_path``), whose path is printed on stderr, as
Jupyter does.  Before that:

* a TCP header line that is not ``Content-Length`` or ``Content-Type`` (an HTTP request line, a
  browser's headers) ends the connection;
* a websocket handshake with an ``Origin`` header (every browser sends one) is refused (403);
* the first message must arrive within ``HANDSHAKE_S`` and be at most ``FIRST_MESSAGE_BYTES``.

The first client that authenticates owns the session; every later connection is closed at once,
never attached.  When that client goes, the server ends (as pygls' transports do).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import stat
import sys
import threading
from pathlib import Path

from pygls.io_ import run_async, run_websocket

from .. import protocol as P

logger = logging.getLogger(__name__)

TOKEN_ENV = "ASIGHT_LSP_TOKEN"
MIN_TOKEN_CHARS = 32   # the server's own: 43 characters of secrets.token_urlsafe(32), 256 bits
HANDSHAKE_S = 10.0              # the first message's deadline
FIRST_MESSAGE_BYTES = 1 << 20   # initialize, with its options
HEADER_LINE_BYTES = 1024
_HEADERS = (b"content-length:", b"content-type:")


class Refused(Exception):
    """A connection that does not become the session (why, for the log)."""


def token_path(port: int) -> Path:
    """Where the token of the session on ``port`` is written: ``$XDG_RUNTIME_DIR/asight`` (the user's
    own runtime folder), else ``~/.cache/asight``; the folder is 0700, the file 0600."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and os.path.isdir(runtime) else Path.home() / ".cache"
    return base / "asight" / f"lsp-{port}.token"


def write_token(path: Path, token: str) -> None:
    """Write ``token`` to ``path``, readable by this user only, never through a link or into a folder
    another user may write (where the file could be swapped)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path.parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{path.parent} is not a folder only this user can write (mode {stat.filemode(info.st_mode)})")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")


def session_token(port: int, token_file: str | None = None) -> tuple[str, Path | None]:
    """The session's token and the file it was written to (None when the launcher chose it)."""
    chosen = os.environ.get(TOKEN_ENV)
    if chosen:
        if len(chosen) < MIN_TOKEN_CHARS:     # a guessable secret is none: refused, not used (no throttling needed)
            raise ValueError(f"${TOKEN_ENV} is {len(chosen)} characters; a session token needs at least "
                             f"{MIN_TOKEN_CHARS} random ones (python -c 'import secrets; print(secrets.token_urlsafe(32))'),"
                             f" or leave it unset and the server makes one")
        return chosen, None
    token = secrets.token_urlsafe(32)
    path = Path(token_file) if token_file else token_path(port)
    write_token(path, token)
    return token, path


class Gate:
    """The session's one seat: taken by the first client that shows the token."""

    def __init__(self, token: str):
        self.token = token
        self.taken = False

    def admit(self, body: bytes) -> dict:
        """The first message, as JSON, when it is an ``initialize`` with the token (which is removed
        from it: nothing later reads or logs it); ``Refused`` otherwise, or when the seat is taken."""
        if self.taken:
            raise Refused("a client is attached already")
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            raise Refused("the first message is not JSON") from None
        params = message.get("params") if isinstance(message, dict) else None
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        shown = _pop_token(options)
        if message.get("method") != "initialize" or not isinstance(shown, str) or \
                not hmac.compare_digest(shown.encode(), self.token.encode()):
            raise Refused("the first message is not an initialize with the session token")
        self.taken = True
        return message


def _pop_token(options) -> object:
    if not isinstance(options, dict):
        return None
    nested = options.get("asight")
    found = nested.pop(P.OPT_SESSION_TOKEN, None) if isinstance(nested, dict) else None
    return options.pop(P.OPT_SESSION_TOKEN, None) or found


async def _first_frame(reader: asyncio.StreamReader) -> bytes:
    """The first LSP frame's body; ``Refused`` on any header but Content-Length/Content-Type."""
    length = None
    while True:
        line = await reader.readuntil(b"\n")
        if line in (b"\r\n", b"\n"):
            break
        if len(line) > HEADER_LINE_BYTES or not line.lower().startswith(_HEADERS):
            raise Refused(f"not an LSP header: {line[:40]!r}")
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1].strip() or b"x")
    if length is None or not 0 < length <= FIRST_MESSAGE_BYTES:
        raise Refused(f"a first message of {length} bytes")
    return await reader.readexactly(length)


def serve_tcp(server, host: str, port: int, token: str) -> None:
    """pygls' TCP server, behind the gate."""
    gate, server._stop_event = Gate(token), threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            if gate.taken:
                raise Refused("a client is attached already")
            body = await asyncio.wait_for(_first_frame(reader), HANDSHAKE_S)
            message = gate.admit(body)
        except (Refused, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError) as err:
            logger.warning("refused a connection: %s", err)
            writer.close()
            return
        server.protocol.set_writer(writer)
        try:
            server.protocol.handle_message(message)
            await run_async(stop_event=server._stop_event, reader=reader, protocol=server.protocol, logger=logger,
                            error_handler=server.report_server_error)
        except ConnectionError as err:
            logger.warning("the client is gone: %s", err)
        finally:                   # the session is over, however it ended
            server.shutdown()

    async def main():
        server._server = await asyncio.start_server(connection, host, port, limit=FIRST_MESSAGE_BYTES)
        async with server._server:
            await server._server.serve_forever()

    _run(main)


def serve_ws(server, host: str, port: int, token: str) -> None:
    """pygls' websocket server, behind the gate (and no browser: no ``Origin``)."""
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed
    gate, server._stop_event = Gate(token), threading.Event()

    def handshake(connection, request):
        if "Origin" in request.headers:
            return connection.respond(403, "a browser's page may not connect\n")
        if gate.taken:
            return connection.respond(409, "a client is attached already\n")
        return None

    async def connection(websocket):
        try:
            body = await asyncio.wait_for(websocket.recv(decode=False), HANDSHAKE_S)
            message = gate.admit(body)
        except (Refused, asyncio.TimeoutError, ConnectionClosed) as err:
            logger.warning("refused a connection: %s", err)
            await websocket.close(1008, "refused")
            return
        from pygls.io_ import WebSocketWriter
        server.protocol.set_writer(WebSocketWriter(websocket), include_headers=False)
        try:
            server.protocol.handle_message(message)
            await run_websocket(stop_event=server._stop_event, websocket=websocket, protocol=server.protocol,
                                logger=logger, error_handler=server.report_server_error)
        finally:
            server.shutdown()

    async def main():
        server._server = await serve(connection, host, port, process_request=handshake)
        async with server._server:
            await server._server.serve_forever()

    _run(main)


def _run(main) -> None:
    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass


def announce(host: str, port: int, path: Path | None) -> None:
    """Say on stderr where the session listens and where its token is."""
    where = f"token in {path}" if path else f"token from ${TOKEN_ENV}"
    print(f"asight-lsp: listening on {host}:{port}; a client sends initializationOptions.{P.OPT_SESSION_TOKEN} "
          f"({where})", file=sys.stderr, flush=True)
