"""pytest-lsp helpers: a real ``asight serve`` subprocess over stdio, VS Code or Neovim capabilities.

``session(client, ...)`` initializes with given ``initializationOptions`` (store root in a temp
dir, features switched off where a test does not need them) and shuts down cleanly.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from asight_lsp import protocol as P
from asight_lsp.server.custom import plain

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SERVER = [sys.executable, "-m", "asight_lsp", "serve"]
CLIENTS = {"vscode": "visual-studio-code", "neovim": "neovim"}


def server_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TVM_NUM_THREADS", "2")
    env.pop("ASIGHT_HOME", None)
    return env


CONFIG = ClientServerConfig(server_command=SERVER, server_env=server_env())


def uri_of(path: Path | str) -> str:
    return Path(path).resolve().as_uri()


async def initialize(client: LanguageClient, kind: str = "vscode", root: Path | None = None,
                     options: dict | None = None) -> float:
    """Initialize the session as a client of a trusted workspace (as VS Code does once trusted; a test of
    the untrusted case passes ``{"trusted": False}``); returns the seconds ``initialize`` took to answer."""
    params = types.InitializeParams(capabilities=client_capabilities(CLIENTS[kind]),
                                    root_uri=uri_of(root) if root else None,
                                    workspace_folders=[types.WorkspaceFolder(uri=uri_of(root), name="ws")] if root else None,
                                    initialization_options={"trusted": True, **(options or {})})
    started = time.perf_counter()
    await client.initialize_session(params)
    return time.perf_counter() - started


def ident(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def open_doc(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = uri_of(path)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=version, text=path.read_text() if text is None else text)))
    return uri


def replace_all(client: LanguageClient, uri: str, text: str, version: int) -> None:
    """A full-text change (what a client sends for a paste or undo)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


async def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05):
    """Poll ``predicate()`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


async def request(client: LanguageClient, method: str, params: dict | None = None):
    """A custom request; the answer as plain dicts and lists."""
    return plain(await client.protocol.send_request_async(method, params or {}))


def messages(client: LanguageClient, uri: str) -> list[str]:
    return [d.message for d in client.diagnostics.get(uri, [])]


def copy_fixture(name: str, dest: Path) -> Path:
    target = dest / Path(name).name
    shutil.copy(FIXTURES / name, target)
    return target


def install_run(workspace: Path, source: Path, run: str = "mbr128", age_s: float = 180.0, fresh: bool = True,
                shipped: bool = False) -> Path:
    """Copy a recorded run (fixtures/runs/<run>) into ``workspace/.asight`` for ``source``.

    The run is re-pointed at ``source`` and, when ``fresh``, at its current function hashes.  It stands
    for the user's own run (marked as one, ``store/owner.py``) unless ``shipped``.
    """
    from asight_lsp.store.owner import OWNER_FILE, mark_own
    from asight_lsp.store.runs import Run
    from asight_lsp.tvmscript.hashing import function_hash
    from asight_lsp.tvmscript.outline import build_outline

    dest = workspace / ".asight" / "runs" / run
    shutil.copytree(FIXTURES / "runs" / run, dest)
    meta = Run(dest).load()
    text = source.read_text()
    outline = build_outline(text, str(source))
    meta.file = str(source.resolve())
    if fresh:
        meta.source_hashes = {fn.id: function_hash(text, fn) for fn in outline.functions
                              if fn.id in meta.source_hashes or fn.id == meta.function}
    meta.created = meta.started = time.time() - age_s - 90
    meta.finished = time.time() - age_s
    Run(dest).save(meta)
    if shipped:
        (dest / OWNER_FILE).unlink(missing_ok=True)
    else:
        mark_own(dest)
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def tuned(workspace: Path) -> Path:
    """matmul_bias_relu.py in the workspace with the recorded run mbr128 installed for it."""
    source = copy_fixture("matmul_bias_relu.py", workspace)
    install_run(workspace, source)
    return source


# batches of 8 trials: progress (and a point to cancel at) every few seconds
TUNING_CONFIG = ClientServerConfig(server_command=SERVER, server_env={**server_env(), "ASIGHT_TRIALS_PER_ITER": "8"})


def watch_runs(client: LanguageClient) -> None:
    """Record the server's run notifications (``client.run_updates``) and refresh requests
    (``client.refreshes``) on a client that runs real tuning jobs."""
    client.run_updates, client.refreshes = [], []

    @client.feature(P.NOTIFY_RUN_UPDATED)
    def run_updated(params):
        client.run_updates.append(plain(params))

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params):
        client.refreshes.append("codeLens")

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def hint_refresh(params):
        client.refreshes.append("inlayHint")


__all__ = ["plain", "request", "CONFIG", "FIXTURES", "ROOT", "initialize", "open_doc", "replace_all", "wait_for", "messages", "uri_of",
           "copy_fixture", "install_run", "pytest_lsp", "TUNING_CONFIG", "watch_runs", "ident"]
