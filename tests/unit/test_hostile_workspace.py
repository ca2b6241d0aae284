"""Issue 40: workspace data a hostile author wrote is read in bounded time, and what the static reader
cannot fold is a diagnostic at its line, never an internal error."""
from __future__ import annotations

import time
from pathlib import Path

from asight_lsp.store.files import file_lines
from asight_lsp.tvmscript.diagnostics import static_diagnostics
from asight_lsp.tvmscript.outline import ChunkCache, build_outline

UNIT = '''from tvm.script import tirx as T

@T.prim_func
def f(A: T.Buffer((N,), "float32")):
    for i in range(N):
        with T.sblock("b"):
            A[i] = T.float32(0)
'''


def outline_text(text: str):
    return build_outline(text, "hostile.py", ChunkCache())


def outline_of(head: str):
    start = time.perf_counter()
    outline = build_outline(head + UNIT, "hostile.py", ChunkCache())
    return outline, time.perf_counter() - start


def test_a_tower_of_powers_is_refused_at_its_line_at_once():
    outline, seconds = outline_of("A = 10 ** 64\nB = A ** 64\nC = B ** 64\nD = C ** 64\nE = D ** 64\nN = E ** 64\n")
    assert seconds < 2
    assert [f.id for f in outline.functions] == ["f"]
    refused = [(e["range"]["start"]["line"], e["message"]) for e in outline.syntax_errors]
    assert [line for line, _ in refused] == [1]      # B: A folds; C..N use a name that is no constant
    assert refused[0][1].startswith("too large to analyse: ")
    assert "N" not in outline.constants


def test_arithmetic_python_refuses_is_a_warning_at_its_line():
    outline, _ = outline_of("N = 4\nX = 1e300 ** 2\nY = 0 ** -1\nZ = 5 // 0\n")
    found = {e["range"]["start"]["line"]: e for e in outline.syntax_errors}
    assert sorted(found) == [1, 2, 3]
    assert all(e["severity"] == "warning" and "cannot fold" in e["message"] for e in found.values())
    assert outline.constants["N"] == 4 and [f.id for f in outline.functions] == ["f"]


GATED = '''from tvm.script import tirx as T
N = 10

@T.prim_func
def f(A: T.Buffer((64,), "float32")):
    for i in T.serial(EXTENT):
        A[0] = T.float32(0)
'''


def test_the_gate_refuses_what_the_reader_will_not_fold():
    """TVM's parser computes literal arithmetic in Python: what the static reader refuses to fold (any
    operator, a name's value, a string or list made long) never reaches the worker."""
    for extent in ("10 ** 10 ** 10", "N ** 10 ** 5", "1 << 10 ** 6", "len('a' * 10 ** 9)", "len([0] * 10 ** 9)",
                   "0x" + "f" * 4000):
        start = time.perf_counter()
        found = static_diagnostics(outline_text(GATED.replace("EXTENT", extent)))
        assert time.perf_counter() - start < 2, extent
        refused = [d for d in found if d["message"].startswith("not evaluated: too large to analyse")]
        assert [d["range"]["start"]["line"] for d in refused] == [5], (extent, found)
        assert not any("internal error" in d["message"] for d in found)
    wide = static_diagnostics(outline_text(GATED.replace("EXTENT", "2 ** 70 + 1")))    # TVM: "got ffi.BigInt"
    assert [(d["range"]["start"]["line"], d["message"].split(";")[0]) for d in wide if d["severity"] == "error"] == [
        (5, "not evaluated: this number has 71 bits")]
    assert not [d for d in static_diagnostics(outline_text(GATED.replace("EXTENT", "0xFFFFFFFFFFFFFFFF % 7")))
                if d["severity"] == "error"]
    assert not [d for d in static_diagnostics(outline_text(GATED.replace("EXTENT", "N ** 4 + (1 << 20) // 3")))
                if d["severity"] == "error"]


def test_a_long_blank_line_is_read_in_linear_time():
    blank = b" " * (4 << 20) + b"\n" + b"\t " * (1 << 20) + b"x\n"
    start = time.perf_counter()
    assert list(file_lines(blank)) == [b"x"]
    assert time.perf_counter() - start < 1


def test_a_refused_run_is_judged_once_per_state_of_its_files(tmp_path, monkeypatch):
    from asight_lsp.store import index as index_module
    run = tmp_path / "runs" / "f-20260101-000000-abcd"
    run.mkdir(parents=True)
    (run / "run.json").write_bytes(b"[" + b"[]," * 200_000 + b"[]]")       # past the container cap
    loads = []
    real_load = index_module.Run.load
    monkeypatch.setattr(index_module.Run, "load", lambda self: loads.append(self.id) or real_load(self))
    index = index_module.RunIndex(tmp_path, min_interval=0)
    assert index.metas() == [] and len(index.problems()) == 1 and "lists and objects" in index.problems()[0]
    for _ in range(3):
        index.metas()
    assert len(loads) == 1
    (run / "run.json").write_text('{"id": "x", "file": "k.py", "function": "f"}')          # repaired: read again
    assert [m.id for m in index.metas()] == [run.name] and len(loads) == 2 and index.problems() == []


def test_a_shipped_run_is_never_resumed_nor_pruned(tmp_path, monkeypatch):
    """A run folder this user did not make here (cloned; its marker copied to another run; another
    user's key) is not resumed; profiles named by someone else never push the user's out."""
    import json
    import shutil
    from asight_lsp.store import caches
    from asight_lsp.store.owner import is_own
    from asight_lsp.store.runs import Run, RunMeta, RunStore
    monkeypatch.setenv("ASIGHT_OWNER_KEY", str(tmp_path / "config" / "owner.key"))
    store = RunStore(tmp_path / ".asight")
    key = dict(file="/w/m.py", function="f", source_hashes={"f": "h"}, target_label="t")
    own = store.create(RunMeta(id="f-20260101-000000-0001", **key))
    assert is_own(own.path) and store.find_resumable("/w/m.py", "f", {"f": "h"}, "t").id == own.id
    shutil.rmtree(own.path)
    shipped = store.runs_dir / "f-20260101-000000-0002"
    shipped.mkdir()
    (shipped / "run.json").write_text(json.dumps({"id": "x", **key}))
    assert store.find_resumable("/w/m.py", "f", {"f": "h"}, "t") is None
    marked = store.create(RunMeta(id="f-20260101-000000-0003", **key))
    shutil.copy(marked.path / "owner", shipped / "owner")                # another run's marker
    shutil.rmtree(marked.path)
    assert not is_own(shipped) and store.find_resumable("/w/m.py", "f", {"f": "h"}, "t") is None
    (shipped / "profiles").mkdir()
    for i in range(caches.KEEP_PROFILES):
        (shipped / "profiles" / f"9999999{i}-999999-999.msgpack").write_bytes(b"\x80")
    run = Run(shipped)
    for ident in ("20260102-000000-000", "20260103-000000-000"):
        caches.archive_profile(run, {"key": {}, "profile": {"id": ident}}, ident)
    assert {"20260102-000000-000.msgpack", "20260103-000000-000.msgpack"} <= {p.name for p in (shipped / "profiles").iterdir()}
    other = store.create(RunMeta(id="f-20260101-000000-0004", **key))
    monkeypatch.setenv("ASIGHT_OWNER_KEY", str(tmp_path / "another-user" / "owner.key"))
    assert not is_own(other.path)


def test_a_shipped_run_is_read_only(tmp_path, monkeypatch):
    """Measuring, re-measuring, cancelling or tuning the missing kernels of a shipped run is refused
    with what to do before anything runs; its torn line is not repaired, its 'running' state not
    rewritten: every byte of the folder stays as it was shipped."""
    import json
    import shutil
    import pytest
    from asight_lsp.services.export import export_model
    from asight_lsp.services.jobs import cancel_run, refresh_run
    from asight_lsp.services.lookup import prepare_run
    from asight_lsp.services.profiling import ProfileOptions, profile_file
    from asight_lsp.store.owner import ShippedRun, mark_own
    from asight_lsp.store.runs import DB_RECORDS, Run
    monkeypatch.setenv("ASIGHT_OWNER_KEY", str(tmp_path / "config" / "owner.key"))
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    source = tmp_path / "matmul_bias_relu.py"
    shutil.copy(fixtures / "matmul_bias_relu.py", source)
    folder = tmp_path / ".asight" / "runs" / "mbr128"
    shutil.copytree(fixtures / "runs" / "mbr128", folder)
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "file": str(source), "state": "running", "pid": 2 ** 22 + 7}))
    (folder / DB_RECORDS).write_bytes((folder / DB_RECORDS).read_bytes() + b'[0, [[')   # a torn last line
    (folder / "profile.msgpack").unlink(missing_ok=True)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    run = Run(folder)
    assert refresh_run(run).state == "failed"                 # shown ended ...
    store = str(tmp_path / ".asight")
    for action, attempt in [("cancelling", lambda: cancel_run(run)),
                            ("measuring its profile", lambda: profile_file(str(source), run="mbr128", store_root=store)),
                            ("re-measuring", lambda: profile_file(str(source), run="mbr128", store_root=store,
                                                                  options=ProfileOptions(remeasure=True))),
                            ("tuning its missing kernels", lambda: export_model(str(source), str(tmp_path / "m.so"),
                                                                                "mbr128", store_root=store,
                                                                                tune_missing=8))]:
        with pytest.raises(ShippedRun, match=rf"^run mbr128 is shipped .* read-only and {action}.*asight adopt "):
            attempt()
    prepare_run(run)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before     # ... and never written
    mark_own(folder)                                          # the user's own run: ended and repaired as before
    assert refresh_run(run).state == "failed" and Run(folder).load().state == "failed"
    prepare_run(run)
    assert (folder / f"{DB_RECORDS}.unreadable").exists()


def test_a_store_read_past_its_budget_holds_no_request(monkeypatch):
    """``server/budget.py``: while the store is read (here: until released), a request that waits answers
    "too large to analyse" at its budget, one that may go without runs answers at its wait, and the
    next ones do not wait again for the same read."""
    import asyncio
    import threading
    import pytest
    from asight_lsp.server import budget

    class Index:
        root, read = "store", threading.Event()

        def due(self):
            return True

    monkeypatch.setattr(budget, "STORE_BUDGET_S", 0.3)
    index, gate = Index(), budget.StoreRefresh()

    async def requests():
        started = time.perf_counter()
        assert await gate.fresh(index, index.read.wait, wait_s=0.05) is False
        with pytest.raises(budget.TooLarge, match="too large to analyse"):
            await gate.fresh(index, index.read.wait)
        assert time.perf_counter() - started < 2
        with pytest.raises(budget.TooLarge):                       # the read overran: no wait at all
            await asyncio.wait_for(gate.fresh(index, index.read.wait), 0.2)
        index.read.set()
        while not await gate.fresh(index, index.read.wait, wait_s=0.05):
            assert time.perf_counter() - started < 10
    asyncio.run(requests())
