"""Fuzz the language server: every request answered, no internal error, bounded memory (issue 14).

ONE ``asight serve --stdio`` process gets ``--docs`` generated and mutated documents and edits
(``bench/fuzz_cases.py``: random bytes, mutated fixtures and workloads, pathological sizes, deep
nesting) on six URIs open at a time, and after each one a few requests about them: every request
the server supports, custom ``asight/*`` requests, ``executeCommand`` with bad arguments, unknown
methods, out-of-range and out-of-schema params, odd notifications and malformed bodies.  The
server is initialized ``trusted: false`` (nothing is tuned or profiled); a recorded run
(fixtures/runs/mbr128) sits in its store so results show in lenses, hovers and code actions.

Printed and written to ``bench/results/fuzz_lsp.json``: deaths (the process ended; it is restarted),
unanswered requests, internal errors (InternalError responses, ``Error`` shown or logged to the
client, tracebacks and ERROR lines on the server's stderr), p50/p99 latency per method, RSS of
the server at the start, every 1,000 documents and at the end, and the machine's load.

    python bench/fuzz_lsp.py [--docs 10000] [--seed 0] [--tvm-diagnostics] [--json PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fuzz_cases as F  # noqa: E402

SERVER = [sys.executable, "-m", "asight_lsp", "serve", "--stdio"]
INTERNAL_ERROR = -32603
OPEN_URIS = 6


def server_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TVM_NUM_THREADS", "2")
    env.pop("ASIGHT_HOME", None)
    return env


def rss_mb(pid: int | None) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (OSError, TypeError):
        return None
    kb = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))
    return round(kb / 1024, 1)


class Server:
    """One server process and a raw JSON-RPC client on its stdio (answers the server's requests)."""

    def __init__(self, proc, stderr_path: Path):
        self.proc, self.stderr_path = proc, stderr_path
        self.next_id, self.pending, self.answers = 0, {}, []   # answers: (method, seconds, error code)
        self.client_errors: list[str] = []     # window/showMessage|logMessage of type Error
        self.null_id_errors = 0                # answers to bodies that had no usable id
        self.dead = asyncio.get_running_loop().create_future()
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, work: Path, stderr_path: Path) -> "Server":
        stderr = open(stderr_path, "ab")
        proc = await asyncio.create_subprocess_exec(*SERVER, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=stderr,
                                                    env=server_env(), cwd=str(work), limit=2**26)
        stderr.close()
        return cls(proc, stderr_path)

    def send_body(self, body: bytes) -> None:
        if self.proc.returncode is None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: dict) -> None:
        self.send_body(json.dumps(message).encode())   # ensure_ascii: lone surrogates travel as \ud800

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params, odd_id: bool = False) -> asyncio.Future:
        self.next_id += 1
        msg_id = f"s{self.next_id}" if odd_id else self.next_id
        future = asyncio.get_running_loop().create_future()
        label = method   # an executeCommand is timed per command (a slow one must be named)
        if method == "workspace/executeCommand" and isinstance(params, dict) and isinstance(params.get("command"), str):
            label = f"{method} {params['command'][:40]}"
        self.pending[msg_id] = (label, time.perf_counter(), future)
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return future

    async def _read(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                length = 0
                while (line := await stream.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length"):
                        length = int(line.split(b":")[1])
                if not length:
                    break
                self._dispatch(json.loads(await stream.readexactly(length)))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        if not self.dead.done():
            self.dead.set_result(True)

    def _dispatch(self, message: dict) -> None:
        if "method" in message and "id" in message:        # a request of the server: answer null
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif message.get("method") in ("window/showMessage", "window/logMessage"):
            params = message.get("params") or {}
            if params.get("type") == 1:
                self.client_errors.append(str(params.get("message"))[:300])
        elif "id" in message and message["id"] in self.pending:
            method, started, future = self.pending.pop(message["id"])
            code = (message.get("error") or {}).get("code")
            self.answers.append((method, time.perf_counter() - started, code, (message.get("error") or {}).get("message")))
            if not future.done():
                future.set_result(message)
        elif "id" in message and message["id"] is None and "error" in message:
            self.null_id_errors += 1

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def stop(self) -> int | None:
        if self.proc.returncode is None:
            try:
                await asyncio.wait_for(self.request("shutdown", None), 30)
                self.notify("exit", None)
                await asyncio.wait_for(self.proc.wait(), 30)
            except (asyncio.TimeoutError, ConnectionError):
                self.proc.kill()
                await self.proc.wait()
        return self.proc.returncode


def install_store(work: Path, source: str) -> None:
    """The recorded run mbr128 in the workspace store, pointing at ``doc0.py`` (opened with its text)."""
    dest = work / ".asight" / "runs" / "mbr128"
    shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", dest)
    run = json.loads((dest / "run.json").read_text())
    run["file"] = str(work / "doc0.py")
    (dest / "run.json").write_text(json.dumps(run))
    (work / "doc0.py").write_text(source)


async def initialize(server: Server, work: Path, tvm_diagnostics: bool) -> None:
    import pytest_lsp
    caps = json.loads((Path(pytest_lsp.__file__).parent / "clients" / "visual_studio_code_v1.65.2.json").read_text())
    options = {"trusted": False, "diagnosticsDelayMs": 50}
    if not tvm_diagnostics:
        options["disabledFeatures"] = ["tvmDiagnostics"]
    await asyncio.wait_for(server.request("initialize", {"processId": os.getpid(), "rootUri": work.as_uri(),
                                                         "capabilities": caps["capabilities"],
                                                         "initializationOptions": options}), 60)
    server.notify("initialized", {})


class Fuzzer:
    """The documents on the six URIs and the messages about them, drawn from one seeded ``Random``."""

    def __init__(self, server: Server, work: Path, seed: int):
        self.server, self.rng, self.seeds = server, random.Random(seed), F.seed_texts()
        self.uris = [(work / f"doc{i}.py").as_uri() for i in range(OPEN_URIS)]
        self.texts: dict[str, str] = {}
        self.versions = {uri: 0 for uri in self.uris}
        self.docs = 0
        self.large: list[tuple[int, int, int]] = []   # (document number, characters, lines) over 100,000 characters

    def document_step(self) -> str:
        rng, uri = self.rng, self.rng.choice(self.uris)
        self.versions[uri] += 1
        if uri not in self.texts or rng.random() < 0.1:
            if uri in self.texts:
                self.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            text = self.seeds[5] if uri.endswith("doc0.py") and uri not in self.texts else F.document(rng, self.seeds)
            self.texts[uri] = text
            if len(text) > 100_000:
                self.large.append((self.docs, len(text), text.count("\n") + 1))
            self.server.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": self.versions[uri], "text": text}})
        else:
            changes, new = F.edit(rng, self.texts[uri], self.seeds)
            if new is None:   # out of range: the server may refuse it; resend the whole text after it
                new = self.texts[uri]
                changes.append({"text": new})
            self.texts[uri] = new
            self.server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": self.versions[uri]},
                                                          "contentChanges": changes})
        self.docs += 1
        return uri

    def message_step(self, uri: str) -> list[asyncio.Future]:
        rng, text = self.rng, self.texts[uri]
        futures = []
        for _ in range(rng.randint(1, 4)):
            method, params = F.request(rng, uri, text, self.uris)
            futures.append(self.server.request(method, params, odd_id=rng.random() < 0.05))
        if rng.random() < 0.05:
            self.server.notify(*F.notification(rng, uri, text))
        if rng.random() < 0.01:
            self.server.send_body(F.malformed_body(rng))
        return futures


async def run_fuzz(args, work: Path) -> dict:
    stderr_path = work / "server.stderr"
    server = await Server.start(work, stderr_path)
    await initialize(server, work, args.tvm_diagnostics)
    fuzzer = Fuzzer(server, work, args.seed)
    started = time.perf_counter()
    rss = [(0, rss_mb(server.pid))]
    deaths, late, all_answers = [], 0, []
    for step in range(args.docs):
        uri = fuzzer.document_step()
        futures = fuzzer.message_step(uri)
        await asyncio.wait([asyncio.gather(*futures), server.dead], timeout=args.timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        late += sum(not f.done() for f in futures)
        if server.dead.done():
            deaths.append({"step": step, "returncode": server.proc.returncode})
            all_answers += server.answers
            server = await Server.start(work, stderr_path)
            await initialize(server, work, args.tvm_diagnostics)
            fuzzer.server, fuzzer.texts = server, {}
        if (step + 1) % args.every == 0:
            rss.append((step + 1, rss_mb(server.pid)))
            print(f"  {step + 1} documents/edits · {len(server.answers)} answers · RSS {rss[-1][1]} MB · "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    await asyncio.sleep(1)
    status = await asyncio.wait_for(server.request("asight/status", {}), 30)
    worker_pid = (status.get("result") or {}).get("workerPid")
    drain_deadline = time.monotonic() + 6 * args.timeout
    while server.pending and time.monotonic() < drain_deadline:
        await asyncio.sleep(0.2)
    unanswered = [{"id": k, "method": v[0]} for k, v in server.pending.items()]
    result = {"rss_mb": {"start": rss[0][1], "end": rss_mb(server.pid), "series": rss,
                         "worker_end": rss_mb(worker_pid)}}
    returncode = await server.stop()
    all_answers += server.answers
    result.update(summarize(all_answers, unanswered, deaths, server, stderr_path, late, returncode))
    result.update({"documents_and_edits": fuzzer.docs, "large_documents": fuzzer.large,
                   "seconds": round(time.perf_counter() - started, 1)})
    log = Path(args.json).with_suffix(".stderr.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(stderr_path, log)
    result["server_stderr"] = str(log)
    return result


def stderr_problems(path: Path) -> list[str]:
    """Tracebacks (where in asight_lsp, and the exception) and ERROR/CRITICAL lines on the server's stderr."""
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    out = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            j, where = i + 1, ""
            while j < len(lines) and (lines[j].startswith(" ") or lines[j] == ""):
                if "asight_lsp" in lines[j] and lines[j].lstrip().startswith("File"):
                    where = lines[j].strip().split("asight_lsp/")[-1]
                j += 1
            out.append(f"traceback: {where} {lines[j] if j < len(lines) else '?'}"[:300])
        elif " ERROR " in line or " CRITICAL " in line:
            out.append(line[:300])
    return out


def grouped(items: list[str], limit: int = 40) -> dict[str, int]:
    """Problems counted by kind (digits and quoted text folded together)."""
    counts: dict[str, int] = {}
    for item in items:
        key = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", item)[:200]
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:limit])


def latency(samples: list[float]) -> dict:
    ms = sorted(s * 1000 for s in samples)
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2), "max_ms": round(ms[-1], 1)}


def summarize(answers, unanswered, deaths, server, stderr_path, late, returncode) -> dict:
    internal = [f"{m}: {msg}"[:300] for m, _, code, msg in answers if code == INTERNAL_ERROR]
    problems = stderr_problems(stderr_path)
    by_method: dict[str, list[float]] = {}
    for method, seconds, _, _ in answers:
        key = method if method.startswith(("textDocument/", "workspace/", "asight/", "codeAction")) else "other"
        by_method.setdefault(key, []).append(seconds)
    codes: dict[str, int] = {}
    for _, _, code, _ in answers:
        codes[str(code or "ok")] = codes.get(str(code or "ok"), 0) + 1
    return {"deaths": deaths, "unanswered": len(unanswered), "unanswered_examples": unanswered[:20],
            "answered_late": late, "requests": len(answers) + len(unanswered),
            "internal_errors": len(internal) + len(server.client_errors) + len(problems),
            "internal_error_kinds": grouped(internal + server.client_errors + problems),
            "answer_codes": codes, "null_id_errors": server.null_id_errors, "exit_code": returncode,
            "latency": {"all": latency([s for _, s, _, _ in answers]),
                        **{k: latency(v) for k, v in sorted(by_method.items())}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10000, help="documents and edits to send")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a step's answers (and 6x that at the end)")
    parser.add_argument("--every", type=int, default=1000, help="RSS sample and progress line every N documents")
    parser.add_argument("--tvm-diagnostics", action="store_true", help="let the TVM worker check units too")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "fuzz_lsp.json"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        install_store(work, F.seed_texts()[5])
        result = asyncio.run(run_fuzz(args, work))
    result.update({"seed": args.seed, "load_average_before": load_before, "load_average_after": os.getloadavg()})
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "rss_mb"} | {"rss_mb": {
        k: v for k, v in result["rss_mb"].items() if k != "series"}}, indent=2))
    ok = not result["deaths"] and not result["unanswered"] and not result["internal_errors"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
