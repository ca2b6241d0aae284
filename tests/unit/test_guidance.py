"""Guided re-tune planning (no TVM): which principles steer, user files, refusals."""
from __future__ import annotations

import json
import shutil

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.services.guidance import faster_principles, load_user_principles, plan_guidance, seed_from
from asight_lsp.store.runs import Run, RunStore, read_records
from tests.conftest import FIXTURES


@pytest.fixture()
def store(tmp_path):
    shutil.copytree(FIXTURES / "runs" / "mbr128", tmp_path / "runs" / "mbr128")
    return RunStore(tmp_path)


def test_plan_from_a_recorded_run_keeps_only_faster_principles(store):
    plan = plan_guidance(store, "mbr128", "MatmulBiasRelu.main")
    assert plan["guided_by"] == "mbr128" and plan["base_records"] == 40
    assert plan["constraints"] and all(p["effect"] < 0 for p in plan["principles"])
    assert plan["constraints"] == [p["constraint"] for p in plan["principles"]]


def test_faster_principles_ranks_and_deduplicates():
    c = {"block": "C", "inst": "SamplePerfectTile", "loop": 1, "index": 3, "n": 4}
    payload = {"principles": [
        {"effect": -0.2, "constraint": {**c, "max": 4}}, {"effect": -0.5, "constraint": {**c, "max": 2}},
        {"effect": 0.3, "constraint": {**c, "index": 0, "min": 8}},
        {"effect": -0.1, "constraint": {"sketch": "cache-write C"}}]}
    chosen = faster_principles(payload)
    assert [p["constraint"]["max"] for p in chosen] == [2]


def test_other_function_and_empty_runs_are_refused(store, tmp_path):
    with pytest.raises(AsightError, match="not softmax"):
        plan_guidance(store, "mbr128", "softmax")
    empty = Run(tmp_path / "runs" / "empty")
    empty.save(Run(store.runs_dir / "mbr128").load())
    with pytest.raises(AsightError, match="no records"):
        plan_guidance(store, "empty", "MatmulBiasRelu.main")


def test_user_principles_file(tmp_path, store):
    good = tmp_path / "p.json"
    good.write_text(json.dumps([{"block": "matmul", "inst": "SamplePerfectTile", "loop": 2, "index": 1, "max": 8}]))
    plan = plan_guidance(store, "mbr128", "MatmulBiasRelu.main", str(good))
    assert plan["principles"][0]["source"] == "user" and plan["constraints"][0]["max"] == 8
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(AsightError, match="not valid JSON"):
        load_user_principles(str(bad))
    bad.write_text(json.dumps([{"block": "matmul"}]))
    with pytest.raises(AsightError, match="not a decision constraint"):
        load_user_principles(str(bad))


def test_seed_copies_the_database(store, tmp_path):
    new = Run(tmp_path / "runs" / "new")
    new.path.mkdir()
    assert seed_from(store.runs_dir / "mbr128", new) == 40
    assert [r["run_secs"] for r in read_records(new.path)] == [r["run_secs"] for r in read_records(store.runs_dir / "mbr128")]


def test_compare_with_plain_at_the_same_budget(store, tmp_path):
    from asight_lsp.services.guidance import compare_with_plain

    base = Run(store.runs_dir / "mbr128")
    guided = Run(store.runs_dir / "guided")
    guided.path.mkdir()
    seed_from(base.path, guided)
    meta = base.load()
    meta.id, meta.guided_by = "guided", "mbr128"
    meta.extra.update({"guidance": {"guided_by": "mbr128", "principles": [{"text": "t"}]}, "seeded_records": 30})
    guided.save(meta)
    assert compare_with_plain(store, base) is None  # a plain run is not compared
    result = compare_with_plain(store, guided)
    records = read_records(base.path)
    best30 = min(r["latency_us"] for r in records[:30] if r["latency_us"])
    best40 = min(r["latency_us"] for r in records if r["latency_us"])
    assert [r["best_us"] for r in result["rows"]] == [best30, best40, best40]  # the base run is the plain arm
    assert result["budget"] == 40 and result["guided_faster"] == 0


def test_tentative_ranges_steer_only_when_labelled():
    c = {"block": "C", "inst": "SamplePerfectTile", "loop": 2, "index": 1, "n": 2, "max": 4}
    payload = {"principles": [], "tentative": [{"effect": -0.3, "constraint": c, "text": "innermost tile of k <= 4"}]}
    assert faster_principles(payload) == []
    chosen = faster_principles(payload, kind="tentative")
    assert [p["constraint"] for p in chosen] == [c] and chosen[0]["source"] == "tentative"
    assert "tentative" in chosen[0]["text"]
