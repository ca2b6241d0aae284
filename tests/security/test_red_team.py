"""The red team (issue 22): hostile text achieves nothing, as root and as an ordinary user.

``redteam.py`` (the harness) sets up a decoy file, a sentinel process, TCP/UDP/Unix listeners and
watches the mount table, then sends a payload that tries every forbidden action (files, sockets of
every family, socketpair + bind, datagrams to another process's Unix socket, fork/exec, signals
incl. tkill, ptrace, mount/open_tree/move_mount, unshare, io_uring, bpf, TIOCSTI), the same payload
hidden from the gate behind a form feed, and every file of ``fixtures/hostile/``:

* ``worker``: straight to the sandboxed worker's parse, the static gate BYPASSED (the sandbox alone);
* ``cli``: ``asight check`` in the workspace; ``lsp``: ``asight serve`` + didOpen, symbols, lenses,
  hovers (gate on).

Asserted: no side effect of any kind, every action the payload reports refused, the sandbox
active as its self-test says.  The control runs the same payload with no sandbox, in a private
mount namespace, and shows it is live (it leaves traces), so these tests can fail.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.security.redteam import TIR   # the gate-bypassing carrier: ``src`` runs as TVM evaluates a loop extent

pytestmark = pytest.mark.tvm

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOBODY = 65534
SETPRIV = shutil.which("setpriv")
AS_NOBODY = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if SETPRIV else []


def user_ids() -> list:
    """Root (when we are root) and an ordinary user: nobody through setpriv, or ourselves when not root."""
    if os.getuid() != 0:
        return [pytest.param("self", id=f"uid{os.getuid()}")]
    nobody = pytest.param("nobody", id="nobody", marks=pytest.mark.skipif(
        not SETPRIV, reason="no setpriv on this machine: the ordinary-user run cannot switch users"))
    return [pytest.param("root", id="root"), nobody]


def runs_as_nobody(python: str) -> bool:
    """It starts, and it can start itself again (the worker is its child) with our packages."""
    child = "import subprocess, sys; subprocess.run([sys.executable, '-I', '-c', 'import tvm, pyseccomp, asight_lsp'], check=True)"
    done = subprocess.run([*AS_NOBODY, python, "-I", "-c", child], capture_output=True, cwd="/", timeout=120)
    return done.returncode == 0


@pytest.fixture(scope="module")
def nobody_python():
    """An interpreter the ordinary user can run, seeing this checkout and its packages (also with ``-I``).

    Ours, if nobody can execute it; else a venv made from the system's Python of the same version
    whose ``.pth`` names this process's site-packages and the checkout (an interpreter under /root,
    as pyenv installs it, is out of nobody's reach)."""
    if not AS_NOBODY:
        pytest.skip("no setpriv on this machine: the ordinary-user run cannot switch users")
    if runs_as_nobody(sys.executable):
        yield sys.executable
        return
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/usr/local/bin")
    if not system:
        pytest.skip(f"nobody cannot run {sys.executable} and there is no system python{sys.version_info[:2]}")
    venv = Path(tempfile.mkdtemp(prefix="asight-nobody-venv-"))
    try:
        subprocess.run([system, "-m", "venv", "--without-pip", str(venv / "v")], check=True, timeout=120)
        site = subprocess.run([str(venv / "v" / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        paths = [str(ROOT)] + [p for p in sys.path if "site-packages" in p and os.path.isdir(p)]
        Path(site, "asight_checkout.pth").write_text("\n".join(paths) + "\n")
        os.chmod(venv, 0o755)
        python = str(venv / "v" / "bin" / "python")
        if not runs_as_nobody(python):
            pytest.skip(f"nobody cannot import TVM with {system} either")
        yield python
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def harness(path: str, user: str, python: str = sys.executable) -> dict:
    work = Path(tempfile.mkdtemp(prefix="asight-redteam-"))
    prefix = []
    if user == "nobody":
        os.chmod(work, 0o755)
        os.chown(work, NOBODY, NOBODY)
        prefix = AS_NOBODY
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(work)}
        done = subprocess.run([*prefix, python, str(HERE / "redteam.py"), path, str(work / "h")], env=env,
                              capture_output=True, text=True, timeout=900, cwd="/")
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["uid"] == (NOBODY if user == "nobody" else os.getuid())
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def python_for(user: str, request) -> str:
    return request.getfixturevalue("nobody_python") if user == "nobody" else sys.executable


# refused by Landlock's ptrace scoping only (opening another process's /proc entries is no syscall of its own)
LANDLOCK_ONLY = {"proc_fd_of_another_process", "proc_environ_of_another_process"}


def assert_refused(reports: dict, landlock: str) -> None:
    payload = reports["payload"]
    assert len(payload) >= 50, payload                                   # the payload ran to its end
    exempt = LANDLOCK_ONLY if landlock.startswith("unsupported") else set()
    assert [name for name, result in payload.items() if not result.startswith("refused") and name not in exempt] == []
    for name, report in reports.items():
        assert "SUCCEEDED" not in report.values(), (name, report)


@pytest.mark.parametrize("user", user_ids())
def test_the_sandbox_alone_contains_every_payload(user, request):
    result = harness("worker", user, python_for(user, request))
    assert result["evidence"] == []
    worker = result["worker"]
    assert_refused(result["reports"], worker["sandbox"]["layers"]["landlock"])
    assert worker["sandbox"]["active"] is True, worker["sandbox"]
    assert all(v.startswith("refused") for v in worker["sandbox"]["selftest"].values())
    assert worker["private_cwd_entries"] == [] and worker["same_worker_after_all"] is True


@pytest.mark.slow
@pytest.mark.parametrize("user", user_ids())
def test_asight_check_leaves_no_trace(user, request):
    result = harness("cli", user, python_for(user, request))
    assert result["evidence"] == []
    assert set(result["cli"]["exit_codes"].values()) <= {0, 1}, result["cli"]    # answered, no crash


@pytest.mark.slow
@pytest.mark.parametrize("user", user_ids())
def test_an_lsp_open_leaves_no_trace(user, request):
    result = harness("lsp", user, python_for(user, request))
    assert result["evidence"] == []
    sandbox = result["lsp"]["workerSandbox"]
    assert sandbox and sandbox["active"] is True and sandbox["selftest"], sandbox


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("unshare"),
                    reason="the control needs root and unshare (a private mount namespace for its mount attempts)")
def test_control_without_a_sandbox_the_payload_leaves_traces():
    work = Path(tempfile.mkdtemp(prefix="asight-redteam-control-"))
    try:
        done = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, str(HERE / "redteam.py"),
                               "raw:none", str(work / "h")], env={**os.environ, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        evidence = json.loads(done.stdout.strip().splitlines()[-1])["evidence"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kinds = " | ".join(evidence)
    for trace in ("tcp connection", "unix_dgram datagram", "marker", "the victim file changed",
                  "the sentinel process died", "the mount table changed"):
        assert trace in kinds, evidence


FORGED_HELLO = ('import msgpack, os, struct\n'
                'd = msgpack.packb({{"id": 0, "hello": {{"pid": 1, "sandbox": {{"active": True, "reason": "forged", '
                '"layers": {{"cwd": {cwd!r}}}}}}}}})\n'
                'os.write(1, struct.pack(">I", len(d)) + d)\n')


def test_a_frame_forged_on_the_workers_pipe_changes_nothing(tmp_path):
    """Code TVM evaluates can write to fd 1, the frame pipe: a later "hello" is not believed (the
    sandbox status stays the self-test's; its folder is not removed on the forger's word)."""
    from asight_lsp.engine import wire
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.outline import build_outline
    decoy = Path(tempfile.mkdtemp(prefix="asight-worker-decoy-"))
    text = TIR.format(src=FORGED_HELLO.format(cwd=str(decoy)))
    outline = build_outline(text, "evil.py")
    try:
        with WorkerClient() as client:
            client.request(wire.CHECK, wire.check_params(text, outline, outline.units), timeout=120)
            assert client.request(wire.PING)["sandbox"]["active"] is True
            assert client.sandbox["reason"] is None and client.sandbox["selftest"]
            real_cwd = client.sandbox["layers"]["cwd"]
        assert decoy.is_dir() and not Path(real_cwd).exists()
    finally:
        shutil.rmtree(decoy, ignore_errors=True)
