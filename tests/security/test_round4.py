"""Red team, round 4 (docs/sandbox.md): four gaps found by an outside red team, each through the real worker.

F1  the sandbox let ``sched_setaffinity`` (and reads of the scheduling state) name any pid: a payload
    re-pinned another process's CPUs.  Now: pid 0 / own pid only; the self-test probes it.
F2  ``T.register_script_namespace`` passed the gate and rebound ``T.Buffer`` in the long-lived worker
    for every later file.  Now: refused by the gate (generator rule), and the worker restores TVM's
    script namespaces after every request (a file that gets past the gate changes no later file).
F3  a CPU bomb (``T.float32(10**10**10)``, which the gate refuses now; here ``sum(range(10 ** 13))``)
    outlived the CLI and the server.  Now: the worker dies with its parent (PR_SET_PDEATHSIG), Ctrl-C kills it at once, and a request has a CPU budget.
F4  memory was bounded by all of RAM.  Now: ``ASIGHT_WORKER_MEM_GB`` (default 4 GiB over the size
    after ``import tvm``) and a clear one-line error.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.redteam import TIR   # the gate-bypassing carrier: ``src`` runs as TVM evaluates a loop extent

pytestmark = pytest.mark.tvm

ROOT = Path(__file__).resolve().parents[2]
SETPRIV = shutil.which("setpriv")
CLEAN = (ROOT / "fixtures" / "matmul.py").read_text()


def direct(client, src: str) -> dict:
    """Evaluate ``src`` in the sandboxed worker (gate bypassed); its report, raised as ``REDTEAM{json}``."""
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    text = TIR.format(src=src)
    outline = build_outline(text, "evil.py")
    reply = client.request(wire.CHECK, wire.check_params(text, outline, outline.units), timeout=120)
    for problem in reply.get("problems", []):
        message = problem.get("message", "")
        if "REDTEAM" in message:
            return json.JSONDecoder().raw_decode(message.split("REDTEAM", 1)[1])[0]
    return {"no report": reply}


def errors(result) -> list[str]:
    return [d["message"] for d in result.diagnostics if d["severity"] == "error"]


# --------------------------------------------------------------------------- F1
def sentinel() -> subprocess.Popen:
    """A process of our uid holding no capabilities (as root the kernel's cap_safe_nice would refuse a
    change to a process with more capabilities than the caller, which hides the gap)."""
    argv = ["sleep", "120"]
    if os.getuid() == 0 and SETPRIV:
        argv = [SETPRIV, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"] + argv
    return subprocess.Popen(argv)


AFFINITY = r'''
import json, os, resource
R = dict()
P = {pid}
for name, fn in (("setaffinity", lambda: os.sched_setaffinity(P, {{min(os.sched_getaffinity(0))}})),
                 ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, P, 19)),
                 ("getaffinity", lambda: os.sched_getaffinity(P)),
                 ("own_affinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
                 ("set_nofile_limit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                 resource.getrlimit(resource.RLIMIT_NOFILE)))):
    try:
        fn(); R[name] = "SUCCEEDED"
    except (OSError, ValueError) as e:
        R[name] = "refused %s" % getattr(e, "errno", e)
raise ValueError("REDTEAM" + json.dumps(R))
'''


def test_f1_no_other_process_can_be_repinned_or_reniced():
    from asight_lsp.engine.client import WorkerClient
    victim = sentinel()
    try:
        time.sleep(0.2)
        mask, nice = os.sched_getaffinity(victim.pid), os.getpriority(os.PRIO_PROCESS, victim.pid)
        with WorkerClient() as client:
            report = direct(client, AFFINITY.format(pid=victim.pid))
            selftest = (client.sandbox or {}).get("selftest") or {}
            assert client.sandbox["active"] is True
        assert os.sched_getaffinity(victim.pid) == mask and os.getpriority(os.PRIO_PROCESS, victim.pid) == nice
        assert report["setaffinity"].startswith("refused") and report["setpriority"].startswith("refused")
        assert report["getaffinity"].startswith("refused")
        assert report["own_affinity"] == "SUCCEEDED"          # its own threads: still allowed
        assert report["set_nofile_limit"].startswith("refused")   # prlimit64 may set RLIMIT_CPU only
        for probe in ("sched_setaffinity_other", "setpriority_other", "sched_getaffinity_other"):
            assert selftest[probe].startswith("refused"), selftest
    finally:
        victim.kill()
        victim.wait()


# --------------------------------------------------------------------------- F2
POISON = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def poison(A: T.Buffer((8,), "float32")):
    T.evaluate(T.register_script_namespace("Buffer", T.int8))
'''
POISON_SRC = ("import tvm.script.tirx as T\nT.register_script_namespace('Buffer', T.int8)\n"
              "raise ValueError('REDTEAM' + '{\"poisoned\": %d}' % (T.Buffer is T.int8))")


def test_f2_the_gate_refuses_register_script_namespace():
    from asight_lsp.tvmscript import tvmscript_api
    from asight_lsp.tvmscript.diagnostics import check_text
    assert "T.register_script_namespace" not in tvmscript_api.MEMBERS
    messages = errors(check_text(POISON, "poison.py"))
    assert any("register_script_namespace" in m for m in messages), messages


def test_f2_a_file_that_rebinds_tvm_names_changes_no_later_file():
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.diagnostics import check_text
    with WorkerClient() as client:
        assert errors(check_text(CLEAN, "matmul.py", client)) == []
        pid = client.pid
        assert direct(client, POISON_SRC) == {"poisoned": 1}      # it did rebind, inside its own request
        later = CLEAN.replace("(A:", "(Later:", 1).replace("A[", "Later[")   # a unit not parsed before (cached by text)
        assert errors(check_text(later, "later.py", client)) == []   # the next file parses as before
        assert client.pid == pid                                    # same long-lived worker


# --------------------------------------------------------------------------- F3
BOMB = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32")):
    A[0] = T.float32(sum(range(10 ** 13)))
'''
CLI = "import sys\nfrom asight_lsp.cli import main\nsys.exit(main())\n"


def worker_children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
            except OSError:
                continue
            if int(stat[1]) == parent and b"asight_lsp.worker" in cmdline:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def busy_cli(tmp_path):
    path = tmp_path / "bomb.py"
    path.write_text(BOMB)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen([sys.executable, "-c", CLI, "check", str(path)], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not worker_children(cli.pid):
        time.sleep(0.1)
    workers = worker_children(cli.pid)
    assert workers, "no worker started"
    time.sleep(4)      # past import and the sandbox: deep in the sum
    assert alive(workers[0])
    return cli, workers[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_f3_the_worker_dies_with_the_cli(tmp_path, sig):
    cli, worker = busy_cli(tmp_path)
    try:
        sent = time.monotonic()
        cli.send_signal(sig)
        cli.wait(timeout=15)
        assert time.monotonic() - sent < 3      # Ctrl-C: the CLI ends at once too (it waited 5 s for a shutdown)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(worker):
            time.sleep(0.1)
        assert not alive(worker), f"worker {worker} still running after the CLI got {sig!r}"
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
        if cli.poll() is None:
            cli.kill()


def test_f3_a_request_has_a_cpu_budget(monkeypatch):
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.diagnostics import check_text
    monkeypatch.setenv("ASIGHT_CHECK_CPU_S", "3")
    with WorkerClient(default_timeout=60) as client:
        start = time.monotonic()
        messages = errors(check_text(BOMB, "bomb.py", client))
        assert time.monotonic() - start < 30
        assert any("needs more than 3 CPU-seconds for 'check'" in m and "ASIGHT_CHECK_CPU_S" in m for m in messages), messages
        assert errors(check_text(CLEAN, "matmul.py", client)) == []   # a fresh worker, a fresh budget


# --------------------------------------------------------------------------- F4
MEMORY = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32")):
    T.evaluate(T.int32(len(list(range(400000000)))))
'''


def test_f4_memory_is_capped_with_a_clear_error(monkeypatch):
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.diagnostics import check_text
    monkeypatch.setenv("ASIGHT_WORKER_MEM_GB", "1")
    with WorkerClient() as client:
        messages = errors(check_text(MEMORY, "memory.py", client))
        assert any("needs more than 1 GiB to evaluate" in m for m in messages), messages
        pid = client.pid
        assert errors(check_text(CLEAN, "matmul.py", client)) == []    # real parses fit under 1 GiB
        assert client.pid == pid
