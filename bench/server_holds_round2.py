"""Issue 40, the outside red team's second round, timed through the real stdio server and CLI.

    python bench/server_holds_round2.py [--json OUT]

* gate: ``asight check`` of a prim_func whose loop extent is ``10 ** 10 ** 10`` (B1) and one whose
  extent is a 4,000-hex-digit literal (B5): seconds to a verdict, and the verdict's first line.
* records: a run whose records file ends with one 126 MiB line (B2), in the workspace of a stdio server:
  ``asight.showSearchSpace`` and ``asight/hotspots`` of that run, sent together, while another file is
  hovered every 0.1 s: when each is answered, and the slowest hover.  Then the same again (cached).
* outline: a 3.9 MB file of 18,000 prim_funcs (B3) opened in the server: its symbols, code lenses and
  inlay hints sent together while another file is hovered every 0.2 s.  Times are the server's (a raw
  client that only splits the stream), not an editor's, whose own parse of 40 MB of answers adds to them.
* shipped: which files of a shipped run (no owner marker) ``asight profile --remeasure`` and
  ``asight tune --cancel`` change (B4).

Load: the script prints ``os.getloadavg()`` before each case; compare runs only at similar load.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GATED = '''from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((64, 64), "float32")):
    for i in T.serial(EXTENT):
        A[0, 0] = 1.0
'''
BIG_FUNCTION = '''@T.prim_func
def f{i}(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("b"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)

'''


class RawClient:
    """Speaks LSP over the server's stdio; answers are kept by id with the time their last byte came."""

    def __init__(self, cwd: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "asight_lsp", "serve"], cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answers, self.next_id, self.cv = {}, 0, threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line.strip() == b"":
                    break
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            body = stream.read(length)
            arrived = time.perf_counter()
            msg = json.loads(body)
            if "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                with self.cv:
                    self.answers[msg["id"]] = (arrived, msg)
                    self.cv.notify_all()

    def send(self, msg: dict) -> None:
        data = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def request(self, method: str, params) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def wait(self, ident: int, timeout: float = 300) -> tuple[float, dict]:
        with self.cv:
            self.cv.wait_for(lambda: ident in self.answers, timeout)
            return self.answers[ident]

    def open(self, path: pathlib.Path) -> str:
        uri = path.resolve().as_uri()
        self.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": path.read_text()}}})
        return uri

    def start(self, root: str) -> None:
        self.wait(self.request("initialize", {"processId": None, "rootUri": pathlib.Path(root).as_uri(), "capabilities": {
            "textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": True}}},
            "initializationOptions": {"trusted": True, "disabledFeatures": ["tvmDiagnostics"]}}))
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def close(self) -> None:
        self.proc.kill()

    def while_hovering(self, uri: str, requests: dict, period: float) -> dict:
        """Send ``requests`` ({name: (method, params)}) and hover ``uri`` every ``period`` until all are answered."""
        started = time.perf_counter()
        ids = {name: self.request(method, params) for name, (method, params) in requests.items()}
        worst = 0.0
        while not all(i in self.answers for i in ids.values()):
            sent = time.perf_counter()
            arrived, _ = self.wait(self.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                                       "position": {"line": 16, "character": 24}}))
            worst = max(worst, arrived - sent)
            time.sleep(period)
        out = {name: round(self.wait(i)[0] - started, 2) for name, i in ids.items()}
        out["errors"] = {name: str(self.wait(i)[1].get("error"))[:160] for name, i in ids.items() if "error" in self.wait(i)[1]}
        return {**out, "worst_hover_s": round(worst, 2)}


def workspace() -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    from tests.lsp.conftest import install_run
    ws = pathlib.Path(tempfile.mkdtemp(prefix="holds2-"))
    for name in ("victim.py", "other.py"):
        shutil.copy(ROOT / "fixtures" / "matmul_bias_relu.py", ws / name)
    return ws, ws / "victim.py", install_run(ws, ws / "victim.py", "mbr128")


def gate_cases() -> dict:
    out = {}
    for name, extent in (("power_tower", "10 ** 10 ** 10"), ("huge_literal", "0x" + "f" * 4000)):
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, f"{name}.py")
        pathlib.Path(path).write_text(GATED.replace("EXTENT", extent))
        started = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "asight_lsp", "check", path], capture_output=True, text=True,
                                  timeout=120, cwd=ROOT)
            said = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[:1]
            out[name] = {"seconds": round(time.perf_counter() - started, 2), "said": said[0][-160:] if said else ""}
        except subprocess.TimeoutExpired:
            out[name] = {"seconds": None, "said": "> 120 s (killed)"}
    return out


def records_case() -> dict:
    ws, victim, run = workspace()
    records = run / "database_tuning_record.json"
    records.write_bytes(records.read_bytes() + b'["' + b"x" * (126 << 20) + b'"]\n')
    client = RawClient(str(ws))
    try:
        client.start(str(ws))
        victim_uri, other_uri = client.open(victim), client.open(ws / "other.py")
        client.wait(client.request("textDocument/documentSymbol", {"textDocument": {"uri": other_uri}}))
        asks = {"space": ("workspace/executeCommand", {"command": "asight.showSearchSpace", "arguments": [{"uri": victim_uri}]}),
                "hotspots": ("asight/hotspots", {"uri": victim_uri})}
        return {"first": client.while_hovering(other_uri, asks, 0.1), "again": client.while_hovering(other_uri, asks, 0.1)}
    finally:
        client.close()


def outline_case() -> dict:
    ws, _victim, _run = workspace()
    big = ws / "big.py"
    big.write_text("from tvm.script import tirx as T\n\n" + "".join(BIG_FUNCTION.format(i=i) for i in range(18000)))
    client = RawClient(str(ws))
    try:
        client.start(str(ws))
        other_uri = client.open(ws / "other.py")
        client.wait(client.request("textDocument/documentSymbol", {"textDocument": {"uri": other_uri}}))
        big_uri = client.open(big)
        doc = {"textDocument": {"uri": big_uri}}
        asks = {"symbols": ("textDocument/documentSymbol", doc), "lenses": ("textDocument/codeLens", doc),
                "inlay": ("textDocument/inlayHint", {**doc, "range": {"start": {"line": 0, "character": 0},
                                                                      "end": {"line": 200, "character": 0}}})}
        return {"bytes": big.stat().st_size, **client.while_hovering(other_uri, asks, 0.2)}
    finally:
        client.close()


def shipped_case() -> dict:
    ws, victim, run = workspace()
    (run / "owner").unlink(missing_ok=True)
    meta = json.loads((run / "run.json").read_text())
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    out = {}
    for name, args in (("remeasure", ["profile", str(victim), "--run", "mbr128", "--remeasure", "--no-stages",
                                      "--budget", "0.2"]),
                       ("cancel", ["tune", "--cancel", "mbr128"])):
        (run / "run.json").write_text(json.dumps({**meta, "state": "running", "pid": 2 ** 22 + 7} if name == "cancel" else meta))
        before["run.json"] = (run / "run.json").read_bytes()
        proc = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=ws, capture_output=True, text=True,
                              timeout=300)
        changed = sorted(p.name for p in run.iterdir() if before.get(p.name) != (p.read_bytes() if p.is_file() else None))
        out[name] = {"rc": proc.returncode, "changed": changed, "said": (proc.stderr.strip() or proc.stdout.strip())[:160]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    parser.add_argument("--cases", default="gate,records,outline,shipped")
    args = parser.parse_args()
    cases = {"gate": gate_cases, "records": records_case, "outline": outline_case, "shipped": shipped_case}
    results = {}
    for name in args.cases.split(","):
        load = os.getloadavg()[0]
        results[name] = {"load": round(load, 1), **cases[name]()}
        print(name, json.dumps(results[name]), flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
