"""Hostile TVMScript against the OS sandbox alone, the static gate bypassed (docs/sandbox.md).

Every payload evaluates, inside TVM's parser, an expression that would create a marker file, change
a decoy file, start a process or open a connection to a listener of this test.  Sent straight to
the sandboxed worker (``WorkerClient.request("check")``) and to TVM's raw parser after
``sandbox.apply()``, none of them leaves a trace; the control parses the same payloads without the
sandbox and shows that each one really runs.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from test_sandbox import snapshot

pytestmark = pytest.mark.tvm

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "fixtures" / "hostile"

TIR = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def evil(A: T.Buffer((8,), "float32")):
    for i in range({expr}):
        with T.sblock("b"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(0)
'''
STORE = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def evil(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("b"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32({expr})
'''
RELAX = '''from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Evil:
    @R.function
    def main(x: R.Tensor(({expr},), "float32")):
        return x
'''
OS, SUB = '__import__("os")', '__import__("subprocess")'

# name -> (template, expression); MARK is the marker's absolute path, VICTIM a decoy file, PORT a listener
PAYLOADS = {
    "os_system": (TIR, f'{OS}.system("touch MARK") + 8'),
    "open_w": (TIR, 'open("MARK", "w").close() or 8'),
    "open_a": (TIR, 'open("MARK", "a").close() or 8'),
    "open_x_store": (STORE, 'open("MARK", "x").close() or 0'),
    "os_open_creat": (TIR, f'{OS}.close({OS}.open("MARK", 0o101)) or 8'),
    "pathlib_write": (TIR, '__import__("pathlib").Path("MARK").write_text("x") + 7'),
    "shutil_copy": (TIR, '__import__("shutil").copy("VICTIM", "MARK") and 8'),
    "subprocess_run": (TIR, f'{SUB}.run(["touch", "MARK"]).returncode + 8'),
    "subprocess_shell": (TIR, f'{SUB}.call("touch MARK", shell=True) + 8'),
    "os_popen": (TIR, f'{OS}.popen("touch MARK").close() or 8'),
    "posix_spawn": (TIR, f'{OS}.waitpid({OS}.posix_spawn("/usr/bin/touch", ["touch", "MARK"], {{}}), 0) and 8'),
    "os_spawnv": (TIR, f'{OS}.spawnv({OS}.P_WAIT, "/usr/bin/touch", ["touch", "MARK"]) + 8'),
    "os_fork": (TIR, f'(lambda os: os.fork() == 0 and (open("MARK", "w"), os._exit(0)) or 8)({OS})'),
    "ctypes_system": (TIR, '__import__("ctypes").CDLL(None).system(b"touch MARK") + 8'),
    "rename_victim": (TIR, f'{OS}.rename("VICTIM", "MARK") or 8'),
    "unlink_victim": (TIR, f'{OS}.unlink("VICTIM") or 8'),
    "truncate_victim": (TIR, f'{OS}.truncate("VICTIM", 0) or 8'),
    "chmod_victim": (TIR, f'{OS}.chmod("VICTIM", 0o777) or 8'),
    "mkdir": (TIR, f'{OS}.mkdir("MARK") or 8'),
    "symlink": (TIR, f'{OS}.symlink("/etc/hostname", "MARK") or 8'),
    "mkstemp": (TIR, '__import__("tempfile").mkstemp(prefix="mark_mkstemp.", dir="DIR")[0] * 0 + 8'),
    "socket_connect": (TIR, '__import__("socket").create_connection(("127.0.0.1", PORT)).sendall(b"x") or 8'),
    "relax_shape_system": (RELAX, f'{OS}.system("touch MARK") + 8'),
    "decorator_open": (TIR.replace("(s_tir=True)", '(s_tir=open("MARK", "w").close() is None)'), "8"),
}


class Listener:
    """A TCP listener on 127.0.0.1: the marker of the network payloads is a connection it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> int:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
        return self.accepted


def payload_texts(folder: Path, port: int) -> dict:
    """Each payload's text, its marker in ``folder`` (one per payload) and the decoy file it targets."""
    out = {}
    for name, (template, expr) in PAYLOADS.items():
        victim = folder / f"victim_{name}"
        victim.write_text("keep me")
        text = template.format(expr=expr)
        out[name] = (text.replace("MARK", str(folder / f"mark_{name}")).replace("VICTIM", str(victim))
                     .replace("DIR", str(folder)).replace("PORT", str(port)))
    return out


@pytest.fixture()
def arena(tmp_path):
    folder = tmp_path / "arena"
    folder.mkdir()
    listener = Listener()
    texts = payload_texts(folder, listener.port)
    yield folder, texts, listener
    listener.close()


def check_params(text: str, name: str) -> dict:
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    outline = build_outline(text, f"{name}.py")
    assert outline.units, name
    return wire.check_params(text, outline, outline.units)


def test_payloads_sent_straight_to_the_sandboxed_worker_leave_no_trace(arena):
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.errors import WorkerError
    folder, texts, listener = arena
    before = snapshot(folder)
    answers = {}
    with WorkerClient() as client:
        assert client.request("ping")["sandbox"]["active"] is True
        pid = client.pid
        for name, text in texts.items():
            try:
                reply = client.request("check", check_params(text, name), timeout=120)
                answers[name] = reply["problems"][0]["message"] if reply["problems"] else "parsed"
            except WorkerError as err:
                answers[name] = f"error: {err}"
        assert client.request("ping")["pid"] == pid and client.restarts == 0   # it kept working
    assert snapshot(folder) == before and listener.close() == 0
    assert len(answers) == len(PAYLOADS), answers
    assert "Operation not permitted" in answers["open_w"]


def test_the_hostile_fixtures_sent_straight_to_the_sandboxed_worker_leave_no_trace(tmp_path, monkeypatch):
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.errors import WorkerError
    monkeypatch.chdir(tmp_path)     # the fixtures write ASIGHT_PWNED into the worker's working directory
    files = sorted(HOSTILE.glob("*.py"))
    assert len(files) >= 8
    with WorkerClient() as client:
        for path in files:
            try:
                client.request("check", check_params(path.read_text(), path.stem), timeout=120)
            except WorkerError:
                pass
        assert client.restarts == 0
    assert list(tmp_path.iterdir()) == []


RAW_PARSE = textwrap.dedent(r'''
    import json, os, sys, time
    from asight_lsp.worker.compat import tvm
    if sys.argv[1] == "sandbox":
        from asight_lsp.worker import sandbox
        assert sandbox.apply().active
    outcome = {}
    for name, text in json.loads(sys.stdin.read()).items():
        lines = ["" if line.startswith(("from ", "import ")) else line for line in text.splitlines()]
        try:
            tvm.script.from_source("\n".join(lines))
            outcome[name] = "parsed"
        except BaseException as err:   # the payload's own error (EPERM) or TVM's
            outcome[name] = type(err).__name__
    time.sleep(0.5)                    # a forked child finishes its marker
    print(json.dumps(outcome))
''')


def raw_parse(texts: dict, mode: str, cwd: Path) -> dict:
    """TVM's own parser on each payload (no gate at all), in a process with or without the sandbox."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", RAW_PARSE, mode], input=json.dumps(texts), capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def traces(folder: Path, before: dict) -> set:
    """Payload names whose marker appeared or whose decoy changed."""
    after = snapshot(folder)
    changed = {entry for entry in set(before) | set(after) if before.get(entry) != after.get(entry)}
    return {name for name in PAYLOADS for entry in changed
            if entry in (f"mark_{name}", f"victim_{name}") or entry.startswith(f"mark_{name}.")}


def test_the_sandbox_alone_stops_what_the_raw_parser_would_run(arena):
    folder, texts, listener = arena
    before = snapshot(folder)
    raw_parse(texts, "sandbox", folder)
    assert traces(folder, before) == set() and listener.accepted == 0
    # control: the same payloads without the sandbox really run
    raw_parse(texts, "plain", folder)
    ran = traces(folder, before) | ({"socket_connect"} if listener.close() else set())
    assert ran == set(PAYLOADS), f"payloads that did not run without the sandbox: {sorted(set(PAYLOADS) - ran)}"
