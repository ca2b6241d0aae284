"""Language-server latency: initialize time, and p50/p99 of hover, codeLens and inlayHint on a
3,000-line TVMScript file, idle and while a tuning job runs (issue 4).

Goals: initialize <= 1 s (process spawn -> answer), p99 <= 30 ms in both cases.

The file is ``fixtures/matmul_bias_relu.py``'s IRModule repeated with distinct names (~3,000
lines); ten of its functions get a recorded run (fixtures/runs/mbr128), so lenses, hovers and
hints carry run results.  Requests are timed at the client (send -> answer parsed with
``json.loads``, as an editor would: no typed deserialization on the client side), one at a time,
like an editor moving the cursor; codeLens covers the whole file, inlayHint a 60-line viewport.
"While tuning" runs a real ``asight.tune`` (matmul64) in the same server during the measurement.

    python bench/lsp_latency.py [--requests 200] [--json bench/results/lsp_latency.json] [--no-tuning]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest_lsp  # noqa: E402  (only for its recorded VS Code client capabilities)

from asight_lsp import protocol as P  # noqa: E402
from asight_lsp.store.runs import Run  # noqa: E402
from asight_lsp.tvmscript.hashing import function_hash  # noqa: E402
from asight_lsp.tvmscript.outline import build_outline  # noqa: E402

SERVER = [sys.executable, "-m", "asight_lsp", "serve"]


def big_file(lines: int = 3000) -> str:
    src = (ROOT / "fixtures" / "matmul_bias_relu.py").read_text()
    head, body = src.split("@I.ir_module", 1)
    parts, n = [head], 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append("@I.ir_module" + body.replace("class MatmulBiasRelu", f"class M{n}"))
        n += 1
    return "".join(parts)


def install_runs(store: Path, path: Path, text: str, count: int = 10) -> None:
    outline = build_outline(text, str(path))
    for fn in outline.functions[:: max(len(outline.functions) // count, 1)][:count]:
        dest = store / "runs" / f"run-{fn.unit}"
        shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", dest)
        meta = Run(dest).load()
        meta.id, meta.file, meta.function = dest.name, str(path), fn.id
        meta.source_hashes = {fn.id: function_hash(text, fn)}
        meta.finished = time.time() - 300
        Run(dest).save(meta)


def env() -> dict:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), out.get("PYTHONPATH", "")) if p)
    out.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    return out


def initialize_times(repeats: int) -> list[float]:
    """Seconds from spawning ``asight serve`` to its answer to ``initialize`` (raw stdio)."""
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env())
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": os.getpid(), "rootUri": None, "capabilities": {}}}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            header += proc.stdout.read(1)
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        json.loads(proc.stdout.read(length))
        out.append(time.perf_counter() - started)
        proc.kill()
        proc.wait()
    return out


def stats(samples: list[float]) -> dict:
    ms = sorted(s * 1000 for s in samples)
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2), "max_ms": round(ms[-1], 2)}


class RawClient:
    """A minimal JSON-RPC client over the server's stdio (answers the server's own requests with null)."""

    def __init__(self, proc):
        self.proc, self.next_id, self.waiting, self.published = proc, 0, {}, {}
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls):
        proc = await asyncio.create_subprocess_exec(*SERVER, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, env=env())
        return cls(proc)

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = 0
            while (line := await stream.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            if not length:
                return
            message = json.loads(await stream.readexactly(length))
            if "method" in message and "id" in message:  # a request from the server
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif message.get("method") == "textDocument/publishDiagnostics":
                uri = message["params"]["uri"]
                self.published[uri] = self.published.get(uri, 0) + 1
            elif "id" in message and message["id"] in self.waiting:
                self.waiting.pop(message["id"]).set_result(message)

    async def request(self, method: str, params) -> dict:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        message = await future
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message.get("result")

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self) -> None:
        await self.request("shutdown", None)
        self.notify("exit", None)
        await self.proc.wait()


async def timed(coro) -> float:
    started = time.perf_counter()
    await coro
    return time.perf_counter() - started


async def measure(client: RawClient, uri: str, text: str, requests: int, seed: int) -> dict:
    # The client's own cyclic GC must not be timed as server latency: each codeLens answer is
    # ~110 kB of JSON parsed into thousands of objects here, and a full collection of this
    # process then adds 40-100 ms to one request in a hundred (measured: the server's handler
    # takes <= 0.1 ms for those; with this process's GC off, p99 fell from 53 to 4 ms).
    # Freezing the bench's long-lived objects keeps collections cheap, as an editor's would be.
    gc.collect()
    gc.freeze()
    rng = random.Random(seed)
    outline = build_outline(text)
    blocks = [b for f in outline.functions for b in f.blocks]
    lines = len(text.splitlines())
    doc = {"uri": uri}
    hover, lens, hint = [], [], []
    for _ in range(requests):
        blk = rng.choice(blocks)
        pos = {"line": blk.range["start"]["line"] + 2, "character": 16}
        hover.append(await timed(client.request("textDocument/hover", {"textDocument": doc, "position": pos})))
        lens.append(await timed(client.request("textDocument/codeLens", {"textDocument": doc})))
        first = rng.randrange(0, lines - 60)
        window = {"start": {"line": first, "character": 0}, "end": {"line": first + 60, "character": 0}}
        hint.append(await timed(client.request("textDocument/inlayHint", {"textDocument": doc, "range": window})))
    return {"hover": stats(hover), "codeLens": stats(lens), "inlayHint": stats(hint)}


async def session(args, work: Path) -> dict:
    text = big_file()
    path = work / "big.py"
    path.write_text(text)
    small = work / "matmul64.py"
    shutil.copy(ROOT / "fixtures" / "matmul64.py", small)
    install_runs(work / ".asight", path, text)
    client = await RawClient.start()
    caps = json.loads((Path(pytest_lsp.__file__).parent / "clients" / "visual_studio_code_v1.65.2.json").read_text())
    await client.request("initialize", {"processId": os.getpid(), "rootUri": work.as_uri(),
                                        "capabilities": caps["capabilities"], "initializationOptions": {}})
    client.notify("initialized", {})
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})
    await client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})  # outline built once
    deadline = time.monotonic() + 180   # the first TVM check of 120 units: wait for it (static, then TVM)
    while client.published.get(uri, 0) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)  # past the server's idle gc.freeze()
    out = {"file_lines": len(text.splitlines()), "functions": len(build_outline(text).functions)}
    out["idle"] = await measure(client, uri, text, args.requests, 0)
    if not args.no_tuning:
        small_uri = small.as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": small_uri, "languageId": "python",
                                                                "version": 1, "text": small.read_text()}})
        started = await client.request("workspace/executeCommand", {"command": P.CMD_TUNE, "arguments": [
            {"uri": small_uri, "function": "matmul64", "trials": 64}]})
        run_id = started["run"]["id"]
        await asyncio.sleep(8)  # the job is past start-up and measuring
        out["tuning"] = await measure(client, uri, text, args.requests, 1)
        state = await client.request(P.REQ_STATUS, {})
        out["tuning"]["job_still_running"] = any(j["id"] == run_id for j in state["jobs"])
        await client.request("workspace/executeCommand", {"command": P.CMD_CANCEL, "arguments": [{"run": run_id}]})
    await client.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--initialize-repeats", type=int, default=5)
    parser.add_argument("--no-tuning", action="store_true")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "lsp_latency.json"))
    args = parser.parse_args()
    init = initialize_times(args.initialize_repeats)
    result = {"initialize_s": {"min": round(min(init), 3), "median": round(statistics.median(init), 3),
                               "all": [round(t, 3) for t in init]},
              "load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        result.update(asyncio.run(session(args, Path(tmp))))
    result["goals"] = {"initialize_le_1s": result["initialize_s"]["median"] <= 1.0,
                       "p99_le_30ms": all(v["p99_ms"] <= 30 for case in ("idle", "tuning") if case in result
                                          for k, v in result[case].items() if isinstance(v, dict))}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
