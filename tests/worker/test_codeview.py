"""The code view on the recorded run mbr128 (40 MetaSchedule records of matmul+bias+relu, replayed):
a source line's linked generated lines really come from it, at every level."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from asight_lsp.services.codeview import code_diff, code_view

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "fixtures" / "matmul_bias_relu.py"
RUN = ROOT / "fixtures" / "runs" / "mbr128"
STORE = re.compile(r"^\s*(?P<buf>[A-Za-z_]\w*)\[[^\]]*\]\s*=")

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def source_lines():
    return SOURCE.read_text().splitlines()


def fresh_run(tmp_path) -> Path:
    """A copy of mbr128 keyed by the fixture's current function hash (as the LSP tests install it)."""
    from asight_lsp.store.runs import Run
    from asight_lsp.tvmscript.hashing import function_hash
    from asight_lsp.tvmscript.outline import build_outline
    run = tmp_path / "mbr128"
    shutil.copytree(RUN, run)
    meta = Run(run).load()
    text = SOURCE.read_text()
    meta.source_hashes = {fn.id: function_hash(text, fn) for fn in build_outline(text, str(SOURCE)).functions}
    Run(run).save(meta)
    return run


def _view(worker, tmp_path, level, run=str(RUN), candidate=None):
    return code_view(str(SOURCE), run, candidate, level, None, str(tmp_path / "store"), worker)


def assert_stores_link_to_their_buffer(view, source_lines):
    """Every generated line linked to a source store writes the same buffer (lowered: ``C`` or ``C_1``)."""
    generated = view["text"].splitlines()
    checked = 0
    for link in view["links"]:
        store = STORE.match(source_lines[link["sourceLine"]])
        if store is None:
            continue
        line = generated[link["line"]]
        assert re.match(rf"^\s*{store['buf']}(_\d+)?\[", line), (source_lines[link["sourceLine"]], line)
        checked += 1
    return checked


def test_scheduled_best_links(worker, tmp_path, source_lines):
    view = _view(worker, tmp_path, "scheduled")
    assert view["schema"] == "asight.code/1" and view["candidate"]["best"] and view["candidate"]["trial"] == 7
    assert "asight:" not in view["text"] and "T.parallel" in view["text"]
    assert assert_stores_link_to_their_buffer(view, source_lines) >= 4
    by_source = {item["sourceLine"]: item["lines"] for item in view["bySource"]}
    generated = view["text"].splitlines()
    update = next(i for i, s in enumerate(source_lines) if s.strip().startswith("C[vi, vj] = C[vi, vj] +"))
    assert [generated[g].strip() for g in by_source[update]] == ["C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"]
    header = next(i for i, s in enumerate(source_lines) if 'T.sblock("matmul")' in s)
    assert any('T.sblock("matmul_update")' in generated[g] for g in by_source[header])
    relu = next(i for i, s in enumerate(source_lines) if 'T.sblock("relu")' in s)
    assert all(generated[g].startswith(" ") for g in by_source[relu]) and len(by_source[relu]) >= 4


def test_lowered_links(worker, tmp_path, source_lines):
    view = _view(worker, tmp_path, "lowered")
    assert "T.sblock" not in view["text"] and "T.Broadcast" in view["text"]
    assert assert_stores_link_to_their_buffer(view, source_lines) >= 8   # the unrolled init stores of C
    assert {source_lines[item["sourceLine"]].strip().split("[")[0] for item in view["bySource"]} == {"C", "E", "D"}


def test_candidate_and_untouched_parse(worker, tmp_path, source_lines):
    other = _view(worker, tmp_path, "scheduled", candidate=3)
    assert other["candidate"] == {"trial": 3, "latencyUs": pytest.approx(705.05, abs=0.1), "best": False}
    assert "T.vectorized(4)" in other["text"]
    # Replaying traces must not have changed the cached parse of the source: the untuned view is plain.
    untuned = code_view(str(SOURCE), None, None, "scheduled", None, str(tmp_path / "empty"), worker)
    assert untuned["run"] is None and untuned["candidate"] is None
    assert "T.grid(128, 128, 128)" in untuned["text"] and "T.parallel" not in untuned["text"]
    assert assert_stores_link_to_their_buffer(untuned, source_lines) == 4


def test_llvm_and_asm_links(worker, tmp_path, source_lines):
    llvm = _view(worker, tmp_path, "llvm")
    assert llvm["language"] == "llvm" and "define" in llvm["text"]
    linked = {source_lines[item["sourceLine"]].strip().split("[")[0] for item in llvm["bySource"]}
    assert linked == {"C", "E", "D"}
    asm = code_view(str(SOURCE), None, None, "asm", None, str(tmp_path / "empty"), worker)   # serial build
    generated = asm["text"].splitlines()
    assert asm["links"] and all(source_lines[link["sourceLine"]].strip()[0] in "CED" for link in asm["links"])
    assert all(not generated[link["line"]].strip().startswith(".") for link in asm["links"])
    assert any("vfmadd" in generated[link["line"]] or "vmul" in generated[link["line"]] for link in asm["links"]
               if source_lines[link["sourceLine"]].strip().startswith("C[vi, vj] = C"))


def test_asm_of_the_parallel_schedule_needs_the_serial_variant(worker, tmp_path, source_lines):
    parallel = _view(worker, tmp_path, "asm")
    assert parallel["links"] == []          # __tvm_parallel_lambda bodies carry no .loc (docs/tvm.md §5)
    serial = code_view(str(SOURCE), str(RUN), None, "asm", None, str(tmp_path / "store"), worker, serial=True)
    assert serial["serial"] and "serial variant" in serial["note"] and serial["candidate"]["trial"] == 7
    linked = {source_lines[item["sourceLine"]].strip().split("[")[0] for item in serial["bySource"]}
    assert linked == {"C", "E", "D"}
    chosen = code_view(str(SOURCE), str(RUN), 3, "asm", None, str(tmp_path / "store"), worker, serial=True)
    assert chosen["links"] and chosen["text"] != serial["text"]


def test_an_edited_function_is_flagged_stale(worker, tmp_path):
    edited = tmp_path / "mbr.py"
    edited.write_text(SOURCE.read_text().replace('T.sblock("relu")', 'T.sblock("relu2")'))
    run = fresh_run(tmp_path)
    view = code_view(str(edited), str(run), None, "scheduled", None, str(tmp_path / "store"), worker)
    assert view["stale"] is True and view["note"].startswith("⚠ stale: ") and "source changed since run" in view["note"]
    assert _view(worker, tmp_path, "scheduled", run=str(run))["stale"] is False


def test_diff_of_two_candidates(worker, tmp_path):
    diff = code_diff(str(SOURCE), {"run": str(RUN), "candidate": 3}, {"run": str(RUN), "candidate": None},
                     None, str(tmp_path / "store"), worker)
    assert diff["schema"] == "asight.codeDiff/1"
    assert diff["latencyUs"][0] == pytest.approx(705.05, abs=0.1) and diff["deltaUs"] < 0
    keys = {d["block"] + ":" + (d["loopVar"] or d["annotation"] or "") for d in diff["decisions"]}
    assert {"matmul:i", "matmul:j"} <= keys    # trial 3 vs trial 7 (the best by re-measurement): i and j tiles differ
    assert "-v5, v6, v7, v8 = sch.sample_perfect_tile" in diff["traceDiff"]
    assert diff["codeDiff"].startswith("--- mbr128 trial 3")


def test_shares_from_a_cached_profile(worker, tmp_path, source_lines, monkeypatch):
    run = fresh_run(tmp_path)
    profile = {"kernels": [{"function": "MatmulBiasRelu.main", "blocks": {"tuned": [
        {"name": "matmul", "us": 100.0, "share": 0.8}, {"name": "bias_add", "us": 5.0, "share": 0.04},
        {"name": "relu", "us": 20.0, "share": 0.16}]}, "stages": {"tuned": {"source": "rdtsc"}},
        "cachegrind": {"tuned": {"lines": [{"line": 21, "Ir": 900}, {"line": 30, "Ir": 100}]}}}]}
    monkeypatch.setattr("asight_lsp.services.codeview.load_profile", lambda _run: profile)
    view = _view(worker, tmp_path, "scheduled", run=str(run))
    shares = {source_lines[link["sourceLine"]].strip().split("[")[0]: link.get("share") for link in view["links"]
              if STORE.match(source_lines[link["sourceLine"]])}
    assert shares == {"C": 0.8, "E": 0.04, "D": 0.16}
    assert view["shareSource"] and not view["note"]
    update = next(i for i, s in enumerate(source_lines) if s.strip().startswith("C[vi, vj] = C[vi, vj] +"))
    assert {link.get("lineShare") for link in view["links"] if link["sourceLine"] == update} == {0.9}
    assert view["lineShareSource"].startswith("the run's cached profile with cachegrind")
    other = _view(worker, tmp_path, "scheduled", run=str(run), candidate=3)
    assert not any("share" in link or "lineShare" in link for link in other["links"]) and "best record only" in other["note"]
