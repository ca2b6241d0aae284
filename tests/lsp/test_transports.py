"""``asight serve --tcp PORT`` and ``--ws PORT``: the same server over a socket and a websocket."""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

from tests.lsp.conftest import FIXTURES, server_env

INIT = {"capabilities": {}, "initializationOptions": {"disabledFeatures": ["tvmDiagnostics"]}}
HOVER = {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 8, "character": 16}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def messages() -> list[dict]:
    text = (FIXTURES / "matmul64.py").read_text()
    return [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
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
def serve():
    procs = []

    def start(*args):
        procs.append(subprocess.Popen([sys.executable, "-m", "asight_lsp", "serve", *args], env=server_env()))
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


async def test_tcp(serve):
    port = free_port()
    serve("--tcp", str(port))
    reader, writer = await connect(lambda: asyncio.open_connection("127.0.0.1", port))
    for message in messages():
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
    serve("--ws", str(port))
    ws = await connect(lambda: websockets.connect(f"ws://127.0.0.1:{port}"))
    for message in messages():
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
