"""A minimal synchronous LSP client over stdio (JSON-RPC with Content-Length frames), for the red team's
harness, which runs as an ordinary user outside pytest: open a file, wait for its diagnostics, ask
for symbols, lenses and hovers, as an editor does."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path


class StdioClient:
    def __init__(self, argv: list[str], cwd: Path, env: dict):
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id, self.replies, self.diagnostics = 0, {}, {}
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def __enter__(self) -> "StdioClient":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.proc.wait(timeout=30)
        except (OSError, TimeoutError, subprocess.TimeoutExpired):
            self.proc.kill()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = out.read(1)
                if not byte:
                    return
                header += byte
            length = int(next(line.split(b":")[1] for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")))
            self.inbox.put(json.loads(out.read(length)))

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params, timeout: float = 300.0):
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self._pump(lambda: rid in self.replies, timeout)
        reply = self.replies.pop(rid)
        return reply.get("result")

    def _pump(self, done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            try:
                message = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError("the language server did not answer") from None
            if "id" in message and "method" in message:       # a request from the server: answer it
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "id" in message:
                self.replies[message["id"]] = message
            elif message.get("method") == "textDocument/publishDiagnostics":
                self.diagnostics[message["params"]["uri"]] = message["params"]["diagnostics"]

    def initialize(self, root: Path) -> None:
        self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {},
                                    "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}],
                                    "initializationOptions": {"diagnosticsDelayMs": 0}})
        self.notify("initialized", {})

    def open_and_query(self, path: Path, text: str) -> list:
        uri = path.resolve().as_uri()
        self.diagnostics.pop(uri, None)
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                              "text": text}})
        self._pump(lambda: uri in self.diagnostics, 300)
        doc = {"textDocument": {"uri": uri}}
        self.request("textDocument/documentSymbol", doc)
        self.request("textDocument/codeLens", doc)
        for line in range(min(len(text.split("\n")), 12)):
            self.request("textDocument/hover", {**doc, "position": {"line": line, "character": 8}})
        return self.diagnostics[uri]
