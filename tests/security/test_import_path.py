"""Nothing in a workspace is imported by the product (docs/sandbox.md, import path; issue 22 class 4).

A workspace holds ``msgpack.py``, ``pyseccomp.py``, ``tvm.py``, ``numpy.py``, ``sitecustomize.py``
and an ``asight_lsp/`` package, each of which would write a marker file if imported.  The worker,
``asight check`` (the installed console script), a tuning job (its TVM builder/runner pools too) and
the language server as the VS Code extension starts it (``python -I -m asight_lsp serve`` in the
workspace) run there: no marker appears, and the sandbox they report is the real one.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import FIXTURES, initialize, open_doc, request, server_env, wait_for

pytestmark = pytest.mark.tvm

SHADOWS = ["msgpack", "pyseccomp", "tvm", "numpy", "sitecustomize", "usercustomize", "asight_lsp/__init__",
           "asight_lsp/worker/__init__", "asight_lsp/worker/__main__", "startup"]
# the console script pip writes for `asight` (its own folder, not the working directory, is on sys.path)
CONSOLE_SCRIPT = ("import re, sys\nfrom asight_lsp.cli import main\nif __name__ == '__main__':\n"
                  "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n")


def shadowed_workspace(root: Path, markers: Path) -> Path:
    """A workspace whose every shadow module writes ``markers/<name>`` when imported (and a pyseccomp
    that would claim a working filter, as the one of issue 22 did)."""
    markers.mkdir(parents=True, exist_ok=True)
    for name in SHADOWS:
        path = root / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        flag = markers / name.replace("/", ".")
        path.write_text(f"open({str(flag)!r}, 'w').close()\n"
                        "class SyscallFilter:\n    def __init__(self, *a): pass\n    def __getattr__(self, n):"
                        " return lambda *a, **k: None\n")
    (root / "kernel.py").write_text((FIXTURES / "matmul.py").read_text())
    return root


def hostile_env(ws: Path) -> dict:
    """The user's environment pointing Python at the workspace: children must ignore it."""
    return {**server_env(), "PYTHONPATH": str(ws), "PYTHONSTARTUP": str(ws / "startup.py"),
            "PYTHONHOME": os.environ.get("PYTHONHOME", sys.base_prefix)}


@pytest.fixture()
def ws(tmp_path):
    return shadowed_workspace(tmp_path / "ws", tmp_path / "markers")


def fired(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws.parent / "markers").iterdir())


def test_the_worker_runs_isolated_from_cwd_and_python_variables(ws, monkeypatch):
    from asight_lsp.engine import wire
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.outline import build_outline
    monkeypatch.chdir(ws)
    for key, value in hostile_env(ws).items():
        if key.startswith("PYTHON"):
            monkeypatch.setenv(key, value)
    text = (ws / "kernel.py").read_text()
    outline = build_outline(text, "kernel.py")
    with WorkerClient() as client:
        reply = client.request(wire.CHECK, wire.check_params(text, outline, outline.units), timeout=120)
        assert client.sandbox["active"] is True, client.sandbox
    assert not reply.get("problems"), reply
    assert fired(ws) == []


def test_asight_check_and_tune_in_a_shadowed_workspace(ws, tmp_path):
    script = tmp_path / "bin" / "asight"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT)
    env = {**server_env(), "ASIGHT_HOME": str(tmp_path / "store")}
    check = subprocess.run([sys.executable, str(script), "check", "kernel.py"], cwd=ws, env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert "sandbox" not in check.stderr, check.stderr      # no "runs without its OS sandbox" warning
    tune = subprocess.run([sys.executable, str(script), "tune", "kernel.py", "--trials", "2"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=600)
    assert tune.returncode == 0, tune.stdout[-2000:] + tune.stderr[-2000:]
    assert fired(ws) == []


LSP_ROOT = Path(tempfile.gettempdir()) / f"asight-shadowed-{os.getpid()}"
# what the VS Code extension runs (settings.ts serverCommand), with the workspace as its cwd; it refuses
# to start before the shadow files exist, so that the test cannot pass vacuously
SERVE = ["sh", "-c", f'test -f "{LSP_ROOT}/ws/msgpack.py" || exit 3; cd "{LSP_ROOT}/ws" && '
         'exec "$0" -I -m asight_lsp serve --stdio', sys.executable]


@pytest.fixture(scope="module")
def lsp_ws():
    ws = shadowed_workspace(LSP_ROOT / "ws", LSP_ROOT / "markers")
    yield ws
    shutil.rmtree(LSP_ROOT, ignore_errors=True)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVE, server_env=hostile_env(LSP_ROOT / "ws")))
async def client(lsp_client: LanguageClient, lsp_ws):
    yield
    await lsp_client.shutdown_session()


async def test_the_server_started_in_a_shadowed_workspace_imports_nothing_from_it(client: LanguageClient, lsp_ws):
    await initialize(client, "vscode", lsp_ws, {"diagnosticsDelayMs": 50})
    uri = open_doc(client, lsp_ws / "kernel.py")
    await wait_for(lambda: uri in client.diagnostics, timeout=180)
    status = await wait_for_sandbox(client)
    assert status["workerSandbox"]["active"] is True, status
    assert fired(lsp_ws) == []


async def wait_for_sandbox(client: LanguageClient) -> dict:
    for _ in range(600):      # the worker's first frame (its sandbox) comes before its first answer
        status = await request(client, P.REQ_STATUS)
        if status["workerSandbox"] is not None:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError("the worker never reported its sandbox")
