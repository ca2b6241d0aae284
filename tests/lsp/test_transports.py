"""``asight serve --tcp PORT`` and ``--ws PORT``: the same server over a socket and a websocket."""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import pytest

from tests.lsp.conftest import FIXTURES, server_env

INIT = {"capabilities": {}, "initializationOptions": {"disabledFeatures": ["tvmDiagnostics"]}}
HOVER = {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 8, "character": 16}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def messages(token: str) -> list[dict]:
    text = (FIXTURES / "matmul64.py").read_text()
    init = {**INIT, "initializationOptions": {**INIT["initializationOptions"], "sessionToken": token}}
    return [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": "file:///x.py", "languageId": "python", "version": 1, "text": text}}},
            {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": HOVER}]


async def connect(open_fn, attempts: int = 200):
    for _ in range(attempts):
        try:
            return await open_fn()
        except OSError:
            await asyncio.sleep(0.05)
    raise AssertionError("the server did not listen")


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def read_frame(reader) -> dict:
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length"):
            length = int(line.split(b":")[1])
    return json.loads(await reader.readexactly(length))


async def until_id(receive, wanted: int) -> dict:
    while True:
        message = await receive()
        if message.get("id") == wanted:
            return message


@pytest.fixture
def serve(tmp_path):
    """Start ``asight serve ARGS``; returns the session token (written to a file by the server)."""
    procs = []

    def start(*args) -> str:
        token_file = tmp_path / f"token-{len(procs)}"
        procs.append(subprocess.Popen([sys.executable, "-m", "asight_lsp", "serve", *args, "--token-file",
                                       str(token_file)], env=server_env()))
        for _ in range(400):
            if token_file.exists() and token_file.read_text().endswith("\n"):
                assert token_file.stat().st_mode & 0o777 == 0o600
                return token_file.read_text().strip()
            time.sleep(0.025)
        raise AssertionError("the server wrote no token")
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


async def test_tcp(serve):
    port = free_port()
    token = serve("--tcp", str(port))
    reader, writer = await connect(lambda: asyncio.open_connection("127.0.0.1", port))
    for message in messages(token):
        writer.write(frame(message))
    await writer.drain()
    init = await until_id(lambda: read_frame(reader), 1)
    assert init["result"]["serverInfo"]["name"] == "asight-lsp"
    hover = await asyncio.wait_for(until_id(lambda: read_frame(reader), 2), 30)
    assert hover["result"]["contents"]["value"].startswith("**block `C`**")
    for rid in (3, 4):
        writer.write(frame({"jsonrpc": "2.0", "id": rid, "method": "textDocument/codeLens",
                            "params": {"textDocument": {"uri": "file:///x.py"}}}))
        lenses = (await asyncio.wait_for(until_id(lambda: read_frame(reader), rid), 30))["result"]
        assert len(lenses) == 4 and lenses[0]["command"]["arguments"] == [{"uri": "file:///x.py", "function": "matmul64"}]
    writer.close()


async def test_websocket(serve):
    websockets = pytest.importorskip("websockets")
    port = free_port()
    token = serve("--ws", str(port))
    ws = await connect(lambda: websockets.connect(f"ws://127.0.0.1:{port}"))
    for message in messages(token):
        await ws.send(json.dumps(message))
    receive = lambda: ws.recv()  # noqa: E731
    init = json.loads(await until_id_raw(receive, 1))
    assert init["result"]["serverInfo"]["name"] == "asight-lsp"
    hover = json.loads(await asyncio.wait_for(until_id_raw(receive, 2), 30))
    assert hover["result"]["contents"]["value"].startswith("**block `C`**")
    for rid in (3, 4):  # the second answer is the memoised, pre-serialized one
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "textDocument/codeLens",
                                  "params": {"textDocument": {"uri": "file:///x.py"}}}))
        lenses = json.loads(await asyncio.wait_for(until_id_raw(receive, rid), 30))["result"]
        assert [lens["command"]["title"] for lens in lenses] == ["▶ Tune", "Profile", "Search space", "Loop view"]
    await ws.close()


async def until_id_raw(receive, wanted: int) -> str:
    while True:
        raw = await receive()
        if json.loads(raw).get("id") == wanted:
            return raw


def test_bad_port_is_a_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "serve", "--tcp", "70000"], env=server_env(),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.strip() == "asight: error: port must be between 1 and 65535 (got 70000)"


def test_a_guessable_chosen_token_is_refused():
    """A launcher's ``$ASIGHT_LSP_TOKEN`` shorter than 32 characters is refused at start, not used."""
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "serve", "--tcp", "45731"],
                          env={**server_env(), "ASIGHT_LSP_TOKEN": "hunter2"}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("asight: error: $ASIGHT_LSP_TOKEN is 7 characters; a "
                                                           "session token needs at least 32 random ones")


async def closed_unanswered(reader) -> bool:
    """The server closed this connection without sending a byte (a reset when our bytes were unread)."""
    try:
        return await asyncio.wait_for(reader.read(), 15) == b""
    except ConnectionResetError:
        return True


async def test_tcp_answers_its_own_client_only(serve):
    """A web page's POST, a client without the token and a second client get nothing; the client with
    the token keeps its session throughout."""
    port = free_port()
    token = serve("--tcp", str(port), "--trusted")
    open_tcp = lambda: asyncio.open_connection("127.0.0.1", port)  # noqa: E731
    reader, writer = await connect(open_tcp)
    tune = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).encode()
    writer.write(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                 % len(tune) + tune)
    assert await closed_unanswered(reader)
    for message in (messages("not-the-token")[0], messages(token)[0] | {"method": "shutdown"}):
        reader, writer = await open_tcp()
        writer.write(frame(message))
        assert await closed_unanswered(reader)
    reader, writer = await open_tcp()
    for message in messages(token):
        writer.write(frame(message))
    assert (await asyncio.wait_for(until_id(lambda: read_frame(reader), 2), 30))["result"]["contents"]["value"]
    second_reader, second_writer = await open_tcp()            # refused, never attached
    second_writer.write(frame(messages(token)[0]))
    assert await closed_unanswered(second_reader)
    writer.write(frame({"jsonrpc": "2.0", "id": 3, "method": "asight/status", "params": {}}))
    status = (await asyncio.wait_for(until_id(lambda: read_frame(reader), 3), 30))["result"]
    assert status["status"] == "running"
    writer.close()


async def test_websocket_refuses_browsers_and_strangers(serve):
    websockets = pytest.importorskip("websockets")
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    port = free_port()
    token = serve("--ws", str(port))
    url = f"ws://127.0.0.1:{port}"
    with pytest.raises(InvalidStatus) as refused:
        await connect(lambda: websockets.connect(url, origin="https://evil.example"))
    assert refused.value.response.status_code == 403
    stranger = await websockets.connect(url)
    await stranger.send(json.dumps(messages("guess")[0]))
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(stranger.recv(), 15)
    ws = await websockets.connect(url)
    for message in messages(token):
        await ws.send(json.dumps(message))
    assert json.loads(await asyncio.wait_for(until_id_raw(ws.recv, 2), 30))["result"]["contents"]["value"]
    with pytest.raises(InvalidStatus) as second:
        await websockets.connect(url)
    assert second.value.response.status_code == 409
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "asight/status", "params": {}}))
    assert json.loads(await asyncio.wait_for(until_id_raw(ws.recv, 3), 30))["result"]["status"] == "running"
    await ws.close()
