"""One answer to "which run, and is it valid": the CLI (``asight runs --json``) and the real stdio server
(``asight/runs`` and the code lenses) give each function the same run, status and reasons, over about
twenty store states, one source file each, in one workspace and one store."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from asight_lsp.cli import main
from asight_lsp.engine.wire import WEIGHTS_SUFFIX
from asight_lsp.store.owner import OWNER_FILE
from asight_lsp.store.runs import DB_RECORDS, Run, RunMeta, RunStore
from asight_lsp.tvmscript.hashing import function_hash
from asight_lsp.tvmscript.outline import build_outline
from tests.lsp.conftest import CONFIG, initialize, open_doc, request

TEMPLATE = '''from tvm.script import tirx as T

N = {n}


@T.prim_func(s_tir=True)
def {name}(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32")):
    for i, j in T.grid(N, N):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] {op} T.float32(1)
'''


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


class Workspace:
    """Source files and runs made as the tools make them (``RunStore.create`` marks a run as this user's)."""

    def __init__(self, root: Path):
        self.root, self.store = root, RunStore(root / ".asight")
        self.clock = time.time() - 3600

    def source(self, name: str, n: int = 64, op: str = "+") -> Path:
        path = self.root / f"{name}.py"
        path.write_text(TEMPLATE.format(n=n, name=name, op=op))
        return path

    def run(self, path: Path, tuned_text: str | None = None, run_id: str | None = None, **fields) -> Run:
        """A finished run of ``path``'s function as it was in ``tuned_text`` (default: as it is now)."""
        text = path.read_text() if tuned_text is None else tuned_text
        fn = build_outline(text, str(path)).functions[0]
        self.clock += 10
        meta = RunMeta(id=run_id or self.store.new_run_id(fn.id), file=str(path), function=fn.id,
                       source_hashes={fn.id: function_hash(text, fn)}, target_label="llvm", trials_requested=8,
                       trials_done=8, state="done", created=self.clock, best_us=10.0, baseline_us=40.0,
                       extra={"constants": build_outline(text).constants})
        for key, value in fields.items():
            setattr(meta, key, value) if key in RunMeta.__dataclass_fields__ else meta.extra.__setitem__(key, value)
        run = self.store.create(meta)
        (run.path / DB_RECORDS).write_text("")
        os.utime(run.meta_path, (self.clock, self.clock))
        return run


def state_table(ws: Workspace) -> dict[str, dict]:
    """``{function: what the catalogue must say}``: the run shown (None: none) and its status."""
    expect = {}

    def case(name: str, shown, status: str | None, reason: str | None = None):
        expect[name] = {"shown": shown.id if isinstance(shown, Run) else shown, "status": status, "reason": reason}

    s = ws.source("fresh")
    case("fresh", ws.run(s), "fresh")
    s = ws.source("edited")
    tuned = s.read_text()
    s.write_text(tuned.replace("+ T.float32", "* T.float32"))
    case("edited", ws.run(s, tuned), "stale", "edited's source changed")
    s = ws.source("constant", n=128)
    case("constant", ws.run(s, TEMPLATE.format(n=64, name="constant", op="+")), "stale", "N (used by constant)")
    s = ws.source("weights")
    s.with_name("weights" + WEIGHTS_SUFFIX).write_bytes(b"the weights now")
    case("weights", ws.run(s, kind="relax", build={"weights_digest": "0" * 64, "bound": 3}), "stale",
         "the weights file changed since tuning")
    s = ws.source("adopted")
    case("adopted", ws.run(s, adopted={"workload": 0, "flops": None, "dtypes": ["float32"]}), "fresh")
    s = ws.source("notused")              # adopted, then run.json's figure edited: shown, its records not used
    case("notused", ws.run(s, best_us=0.001, adopted={"workload": 0, "flops": None, "dtypes": ["float32"]}), "fresh")
    s = ws.source("badsection")           # a section of run.json of the wrong shape: read as absent, said
    case("badsection", ws.run(s, shortfall="fewer"), "fresh", 'extra.shortfall is "fewer", not an object')
    s = ws.source("shipped")
    run = ws.run(s)
    (run.path / OWNER_FILE).unlink()
    case("shipped", run, "fresh", "shipped")
    s = ws.source("moved")
    run = ws.run(s)
    meta = json.loads(run.meta_path.read_text())
    run.meta_path.write_text(json.dumps({**meta, "file": "/elsewhere/project/moved.py"}))
    case("moved", run, "fresh", "tuned as /elsewhere/project/moved.py")
    s = ws.source("unreadable")
    bad = ws.store.runs_dir / "unreadable-20260101-000000-0000"
    bad.mkdir(parents=True)
    (bad / "run.json").write_text("{")
    case("unreadable", None, None, "run unreadable-20260101-000000-0000: run.json is unreadable")
    s = ws.source("jsondir")
    (ws.store.runs_dir / "jsondir-20260101-000000-0000" / "run.json").mkdir(parents=True)
    case("jsondir", None, None, "run.json is unreadable (Is a directory)")
    s = ws.source("headless")
    (ws.store.runs_dir / "headless-20260101-000000-0000").mkdir()
    (ws.store.runs_dir / "headless-20260101-000000-0000" / DB_RECORDS).write_text("[0, [[[], []], [1e-05]]]\n")
    case("headless", None, None, "has no run.json (its records are there)")
    s = ws.source("failed")
    case("failed", ws.run(s, state="failed", trials_done=0, best_us=None, error="no vulkan device"), "failed",
         "failed before measuring: no vulkan device")
    s = ws.source("two")
    ws.run(s)
    case("two", ws.run(s), "fresh")
    s = ws.source("reverted")
    older = ws.run(s)
    ws.run(s, s.read_text().replace("+ T.float32", "- T.float32"))
    case("reverted", older, "fresh")       # the newer run tuned an edit since undone: the fresh older one
    s = ws.source("failednewer")
    done = ws.run(s)
    ws.run(s, state="failed", trials_done=0, best_us=None, error="refused target")
    case("failednewer", done, "fresh")
    s = ws.source("queued")
    case("queued", ws.run(s, state="queued", trials_done=0, best_us=None, created=time.time()), "live")
    s = ws.source("cancelled")
    case("cancelled", ws.run(s, state="cancelled", trials_done=0, best_us=None), "fresh")
    s = ws.source("newerbad")
    shown = ws.run(s)
    later = ws.store.runs_dir / "newerbad-20990101-000000-0000"
    later.mkdir()
    (later / "run.json").write_text(json.dumps({"file": str(s), "function": "newerbad", "target": 42}))
    case("newerbad", shown, "fresh", "newerbad-20990101-000000-0000")
    s = ws.source("elsewhere")
    other = ws.root / "sub"
    other.mkdir()
    shutil.copy(s, other / "elsewhere.py")
    ws.run(other / "elsewhere.py")                  # the same function in another file: not this file's run
    case("elsewhere", None, None)
    s = ws.source("stalenewest", n=32)
    ws.run(s, TEMPLATE.format(n=16, name="stalenewest", op="+"))
    case("stalenewest", ws.run(s, TEMPLATE.format(n=8, name="stalenewest", op="+")), "stale", "N (used by stalenewest)")
    return expect


def cli_answer(ws: Workspace, name: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["runs", str(ws.root / f"{name}.py"), "--work-dir", str(ws.store.root), "--json"]) == 0
    [entry] = json.loads(out.getvalue())
    return entry


def latest_of(ws: Workspace, name: str) -> str | None:
    """The run `asight hotspots FILE --run latest` takes (``hotspots._run_of``), None when it refuses."""
    from asight_lsp.errors import AsightError
    from asight_lsp.services.hotspots import _run_of
    path = ws.root / f"{name}.py"
    text = path.read_text()
    try:
        run, _ = _run_of(str(path), text, build_outline(text, str(path)), "latest", None, str(ws.store.root))
    except AsightError:
        return None
    return run.id


def essentials(payload: dict) -> tuple:
    runs = tuple((r["id"], r.get("status"), tuple(r.get("reasons") or ()), bool(r.get("shipped")), r.get("movedFrom"),
                  tuple(r.get("unread") or ())) for r in payload.get("runs") or [])
    return payload.get("shown"), runs


async def lens_of(client, uri: str) -> list[types.CodeLens]:
    return await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri))) or []


async def test_the_cli_and_the_server_show_the_same_run_status_and_reasons_in_every_store_state(client, workspace):
    await initialize(client, "vscode", workspace, {"disabledFeatures": ["tvmDiagnostics"]})
    ws = Workspace(workspace)
    expect = state_table(ws)
    assert len(expect) >= 20
    for name, want in expect.items():
        cli = cli_answer(ws, name)
        uri = open_doc(client, ws.root / f"{name}.py")
        served = await request(client, P.REQ_RUNS, {"uri": uri, "function": name})
        assert essentials(cli) == essentials(served), name
        assert cli.get("shown") == want["shown"], (name, cli)
        passed_over = name == "newerbad"     # a newer run whose run.json cannot be read: the CLI will not pass it
        assert latest_of(ws, name) == (None if passed_over else cli.get("shown")), name   # `--run latest` on a file
        shown = next((r for r in cli["runs"] if r["id"] == cli.get("shown")), None)
        assert (shown or {}).get("status") == want["status"], (name, shown)
        lenses = await lens_of(client, uri)
        said = " ".join(filter(None, [*(l.command.title for l in lenses if l.command), *(
            json.dumps(l.command.arguments) for l in lenses if l.command), *(
            getattr(l.command, "tooltip", None) for l in lenses if l.command)]))
        tips = " ".join([" ".join((shown or {}).get("reasons") or []), *(cli.get("notes") or []),
                         *((shown or {}).get("unread") or []),
                         "shipped" if (shown or {}).get("shipped") else "",
                         f"tuned as {shown['movedFrom']}" if (shown or {}).get("movedFrom") else ""])
        if want["reason"]:
            assert want["reason"] in tips, (name, tips)
        if shown is not None:      # the lens shows the same run, stale when the catalogue says so
            assert f'"run": "{shown["id"]}"' in said, (name, said)
            assert ("⚠ stale" in said) == (want["status"] == "stale"), (name, said)
            for reason in shown.get("reasons") or [] if want["status"] == "stale" else []:
                assert reason in said, (name, reason, said)     # the lens says why, in the catalogue's words
        for note in cli.get("notes") or []:   # the function's unreadable run is named on its lens as well
            run_id = note.split(":")[0].removeprefix("run ").split(" ")[0]
            assert f"run {run_id} not shown" in said, (name, said)
