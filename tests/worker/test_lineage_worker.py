"""Lineage through real TVM: blocks that rfactor, decompose-reduction and cache-write derive from a
source block link to it, with their derivation, in the scheduled and lowered code (and LLVM IR's
debug lines).  The schedules are written by hand, committed as a one-record run and shown by the
code view through the worker, as a tuned run's best record would be."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from asight_lsp.services.codeview import code_view

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "fixtures" / "lineage.py"

pytestmark = pytest.mark.tvm


def _parsed(function: str):
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.selection import select
    from asight_lsp.worker.compat import normalize_mod
    from asight_lsp.worker.parse import parse_request
    from asight_lsp.worker.programs import prim_funcs
    text = SOURCE.read_text()
    outline = build_outline(text, str(SOURCE))
    selection = select(outline, function)
    mod = parse_request(wire.source_params(text, outline, selection.unit, selection.member))
    func = dict(prim_funcs(mod, selection.functions[0].name))[selection.functions[0].name]
    return normalize_mod(func), selection.functions[0].id, outline, text


def _layernorm(sch):
    for name in ("sum", "sqsum"):
        block = sch.get_sblock(name)
        _, k = sch.get_loops(block)
        _, inner = sch.split(k, [None, 8])
        rf = sch.rfactor(inner, 0)
        sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    sch.decompose_reduction(sch.get_sblock("sum"), sch.get_loops(sch.get_sblock("sum"))[1])
    sch.parallel(sch.get_loops(sch.get_sblock("normalize"))[0])


def _matmul(sch):
    block = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    sch.reorder(i0, j, k, i1)
    cache = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(cache, j)
    sch.decompose_reduction(block, k)


def make_run(tmp_path: Path, function: str, schedule) -> Path:
    """A run directory with one record: ``schedule`` applied to ``function`` of the fixture."""
    from asight_lsp.store.runs import Run, RunMeta
    from asight_lsp.tvmscript.hashing import function_hash
    from asight_lsp.worker.compat import ms, s_tir
    from asight_lsp.worker.programs import measuring_target
    mod, fn_id, outline, text = _parsed(function)
    sch = s_tir.Schedule(mod)
    schedule(sch)
    run = tmp_path / f"run-{function}"
    run.mkdir()
    db = ms.database.JSONDatabase(work_dir=str(run))
    workload = db.commit_workload(mod)
    target = measuring_target(None)
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [1e-5], target,
                                                     ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    fn = outline.function(fn_id)
    Run(run).save(RunMeta(id=run.name, file=str(SOURCE), function=fn_id, state="done", trials_done=1,
                          source_hashes={fn_id: function_hash(text, fn)}))
    return run


def _source_block(name: str) -> tuple[int, int, int]:
    """(header line, first, last line) of source block ``name`` (0-based)."""
    lines = SOURCE.read_text().splitlines()
    header = next(i for i, s in enumerate(lines) if f'T.sblock("{name}")' in s)
    indent = len(lines[header]) - len(lines[header].lstrip())
    end = header + 1
    while end + 1 < len(lines) and (not lines[end + 1].strip() or len(lines[end + 1]) - len(lines[end + 1].lstrip()) > indent):
        end += 1
    return header, header, end


def _view(worker, tmp_path, run, function, level):
    return code_view(str(SOURCE), str(run), None, level, function, str(tmp_path / "store"), worker)


def assert_derived_blocks_linked(view, expected: dict[str, str]):
    """Each derived block's header and body lines link into its source block with its label."""
    generated = view["text"].splitlines()
    entries = {e["block"]: e for e in view["lineage"] if e["block"]}
    assert {b: entries[b]["label"] for b in expected if b in entries} == expected
    for block, label in expected.items():
        entry = entries[block]
        header, first, last = _source_block(entry["source"])
        assert entry["line"] is not None and f'T.sblock("{block}")' in generated[entry["line"]]
        own = [link for link in view["links"] if link.get("derivedBlock") == block]
        by_line = {link["line"]: link for link in own}
        assert by_line[entry["line"]]["sourceLine"] == header
        assert by_line[entry["line"]]["derivation"] == label
        assert all(first <= link["sourceLine"] <= last for link in own), own
        assert len(own) >= 4                          # header, axes, reads/writes, the store(s)


LAYERNORM = {"sum_rf_init": "sum — rfactor partial, init", "sum_rf_update": "sum — rfactor partial, update",
             "sum_init": "sum — rfactor combine, init", "sum_update": "sum — rfactor combine, update",
             "sqsum_rf_init": "sqsum — rfactor partial, init", "sqsum_rf_update": "sqsum — rfactor partial, update",
             "sqsum": "sqsum — rfactor combine"}
MATMUL = {"matmul_init": "matmul — init", "matmul_update": "matmul — update", "C_global": "matmul — cache write, reverse-compute-at"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("lineage")
    return {"layernorm": make_run(base, "Lineage.layernorm", _layernorm),
            "matmul": make_run(base, "Lineage.matmul", _matmul)}


@pytest.mark.parametrize("name,expected", [("layernorm", LAYERNORM), ("matmul", MATMUL)])
def test_scheduled_links_every_derived_block(worker, tmp_path, runs, name, expected):
    view = _view(worker, tmp_path, runs[name], f"Lineage.{name}", "scheduled")
    assert view["candidate"]["best"] and not view["stale"]
    assert_derived_blocks_linked(view, expected)


def _stores(view) -> dict[str, set[str]]:
    """``{written buffer: {derivation labels of its linked stores}}`` of a lowered view."""
    generated = view["text"].splitlines()
    out: dict[str, set[str]] = {}
    for link in view["links"]:
        store = re.match(r"^\s*(\w+)\[", generated[link["line"]])
        if store:
            out.setdefault(store[1], set()).add(link.get("derivation"))
    return out


def test_lowered_layernorm_stores_carry_their_derivation(worker, tmp_path, runs):
    view = _view(worker, tmp_path, runs["layernorm"], "Lineage.layernorm", "lowered")
    stores = _stores(view)
    labels = set().union(*stores.values())
    assert {"sum — rfactor partial, init", "sum — rfactor partial, update", "sum — rfactor combine, init",
            "sum — rfactor combine, update", "sqsum — rfactor partial, init", "sqsum — rfactor partial, update",
            "sqsum — rfactor combine"} <= labels
    assert stores["total"] == {"sum — rfactor combine, init", "sum — rfactor combine, update"}
    assert stores["sqsum"] == {"sqsum — rfactor combine"}
    assert any(buf.startswith("Out") and labels == {None} for buf, labels in stores.items())   # normalize: a source block


def test_lowered_matmul_cache_write_and_init(worker, tmp_path, runs):
    view = _view(worker, tmp_path, runs["matmul"], "Lineage.matmul", "lowered")
    stores = _stores(view)
    assert stores["C_global"] == {"matmul — init", "matmul — update"}
    assert any(buf.startswith("C") and labels == {"matmul — cache write, reverse-compute-at"} for buf, labels in stores.items())


def test_llvm_debug_lines_reach_the_rfactor_stores(worker, tmp_path, runs):
    view = _view(worker, tmp_path, runs["layernorm"], "Lineage.layernorm", "llvm")
    source = SOURCE.read_text().splitlines()
    update = next(i for i, s in enumerate(source) if s.strip().startswith("total[vi] = total[vi] +"))
    assert any(link["sourceLine"] == update for link in view["links"])


def test_a_failing_lineage_replay_still_shows_the_code(runs, monkeypatch):
    """Lineage only adds links: when its replay fails, the code comes with span links and the reason."""
    from asight_lsp.engine import wire
    from asight_lsp.services.codeview import _payload
    from asight_lsp.store.runs import Run, read_records
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.selection import select
    from asight_lsp.worker import generated_code

    def broken(*_args):
        raise RuntimeError("replay went wrong\nmore detail")

    monkeypatch.setattr(generated_code, "tie", broken)
    text = SOURCE.read_text()
    outline = build_outline(text, str(SOURCE))
    selection = select(outline, "Lineage.matmul")
    params = {**wire.source_params(text, outline, selection.unit, selection.member), "level": "scheduled",
              "run_dir": str(runs["matmul"])}
    reply = generated_code.code(params)
    assert reply["lineage"] == [] and reply["applied"]["lineage_error"] == "RuntimeError: replay went wrong"
    assert 'T.sblock("matmul_init")' in reply["text"]
    view = _payload(str(SOURCE), selection, Run(runs["matmul"]), read_records(runs["matmul"]), None, reply)[0]
    assert view["links"] and all("derivation" not in link for link in view["links"])


def test_block_graph_carries_the_trace_lineage_for_hotspots():
    """The hotspot attribution's fallback: rfactor/decompose blocks that the graph match cannot pair
    come with their source block from the trace (LayerNorm rfactored: sum_rf_* ← sum, sqsum_* ← sqsum)."""
    import json
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.tir_graphs import block_graph
    root = Path(__file__).resolve().parents[2]
    path = root / "bench" / "workloads" / "layernorm.py"
    text = path.read_text()
    outline = build_outline(text, str(path))
    trace = json.loads((root / "fixtures" / "traces" / "layernorm_rfactor.json").read_text())
    out = block_graph({**wire.source_params(text, outline, outline.units[0]),
                       "traces": [[trace["insts"], trace["decisions"]]]})
    lineage = out["transformed"][0]["lineage"]
    assert lineage["sum_rf_init"] == lineage["sum_rf_update"] == lineage["sum_update"] == "sum"
    assert lineage["sqsum_rf_update"] == "sqsum"
    assert set(lineage.values()) <= {n["name"] for n in out["source"]["nodes"] if n.get("kind") == "block"}
