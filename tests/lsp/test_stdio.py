"""stdin read on the event loop (``server/stdio.py``): framing survives odd clients, and stdin that is
not a pipe of its own falls back to pygls' reader (issue 14)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from asight_lsp.server.stdio import READ_LIMIT, pipe_usable

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "asight_lsp", "serve"]


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def initialize(msg_id: int = 1) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
                  "params": {"processId": None, "rootUri": None, "capabilities": {}}})


def read_message(stream) -> dict:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length"):
            length = int(line.split(b":")[1])
    assert length, "the server closed its output"
    return json.loads(stream.read(length))


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_only_a_pipe_or_socket_of_its_own_is_read_on_the_loop(tmp_path):
    (read_in, write_in), (read_out, write_out) = os.pipe(), os.pipe()   # an editor's two pipes
    with open(read_in, "rb") as stdin, open(write_out, "wb") as stdout, open(write_in, "wb"), open(read_out, "rb"):
        assert pipe_usable(stdin, stdout)
    path = tmp_path / "messages"
    path.write_bytes(b"")
    with open(path, "rb") as stdin, open(path, "ab") as stdout:
        assert not pipe_usable(stdin, stdout)              # a regular file: epoll cannot watch it
    left, right = socket.socketpair()
    with left, right, left.makefile("rb") as stdin, left.makefile("wb") as stdout:
        assert not pipe_usable(stdin, stdout)              # one socket for both: non-blocking would hit stdout
        assert pipe_usable(stdin, right.makefile("wb"))


def test_an_overlong_header_a_slow_body_and_a_closed_stdin():
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env())
    try:
        proc.stdin.write(b"X" * (READ_LIMIT * 2) + b"\r\n")   # no real header is this long: dropped
        message = initialize()
        for i in range(0, len(message), 7):                  # a client writing in small pieces
            proc.stdin.write(message[i:i + 7])
            proc.stdin.flush()
            time.sleep(0.001)
        answer = read_message(proc.stdout)
        assert answer["id"] == 1 and "capabilities" in answer["result"]
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.flush()
        assert read_message(proc.stdout) == {"jsonrpc": "2.0", "id": 2, "result": None}
        proc.stdin.close()                                   # the editor went away without "exit"
        assert proc.wait(timeout=30) is not None
    finally:
        proc.kill()


def test_stdin_from_a_file_is_served_by_pygls_reader(tmp_path):
    requests = tmp_path / "requests"
    requests.write_bytes(initialize(7) + frame({"jsonrpc": "2.0", "id": 8, "method": "shutdown"})
                         + frame({"jsonrpc": "2.0", "method": "exit"}))
    with open(requests, "rb") as stdin:
        out = subprocess.run(SERVER, stdin=stdin, capture_output=True, env=env(), timeout=60).stdout
    assert b'"id": 7' in out and b'"capabilities"' in out and b'"id": 8' in out
