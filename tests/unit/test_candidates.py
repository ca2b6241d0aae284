"""The candidate table: decisions tied to blocks, sketches, feature cache, on the recorded run
``fixtures/runs/mbr128`` (40 real MetaSchedule records of matmul+bias+relu, features extracted by
the TVM worker) and on synthetic runs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgpack
import numpy as np
import pytest

from asight_lsp.analysis import featurelayout as fl
from asight_lsp.store.caches import FEATURES_FILE, read_feature_cache, write_feature_cache
from asight_lsp.analysis.candidates import build_candidates
from asight_lsp.services.run_data import ensure_features, load_candidates
from asight_lsp.analysis.synthetic import SOURCE, synthetic_run
from asight_lsp.analysis.traces import TraceParser, block_infos, format_trace, label_sketches, parse_decisions
from asight_lsp.store.runs import Run, read_records
from asight_lsp.tvmscript.outline import build_outline

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"


@pytest.fixture(scope="module")
def fixture_table():
    table, notes = load_candidates(Run(RUN))
    return table, notes


def mbr_blocks():
    return block_infos(build_outline((ROOT / "fixtures" / "matmul_bias_relu.py").read_text()).functions[0])


def test_fixture_table_has_every_record_with_features(fixture_table):
    table, notes = fixture_table
    assert notes == []
    assert len(table) == 40 and table.valid.all()
    assert all(r is not None and r.shape == (3, fl.LENGTH) for r in table.rows)
    assert all(s == ["C", "E", "D"] for s in table.stores)
    assert table.baseline_rows[0].shape == (3, fl.LENGTH) and table.baseline_us == pytest.approx(2438.536, abs=0.01)
    assert table.num_cores == 2
    assert table.latency_us[table.best_index()] == pytest.approx(np.nanmin(table.latency_us))


def test_fixture_sketches_are_the_three_design_spaces(fixture_table):
    table, _ = fixture_table
    labels = sorted(s["label"] for s in table.sketches)
    assert labels == ["compute bias_add at a sampled loop", "fuse bias_add at matmul j0", "fuse bias_add at matmul j1"]
    assert sum(s["count"] for s in table.sketches) == 40


def test_decisions_name_block_loop_and_annotation():
    rec = read_records(RUN)[0]
    decisions = parse_decisions(rec["insts"], rec["decisions"], mbr_blocks())
    tiles = [d for d in decisions if d.inst == "SamplePerfectTile"]
    assert [(d.block, d.loop, d.loop_var, len(d.value)) for d in tiles] == [
        ("matmul", 0, "i", 4), ("matmul", 1, "j", 4), ("matmul", 2, "k", 2)]
    assert all(np.prod(d.value) == 128 for d in tiles)
    (cat,) = [d for d in decisions if d.inst == "SampleCategorical"]
    assert cat.block == "root" and cat.annotation == "meta_schedule.unroll_explicit" and cat.value in (0, 16, 64, 512)


def test_compute_location_decision_belongs_to_its_block():
    recs = read_records(RUN)
    rec = next(r for r in recs if any(i[0] == "SampleComputeLocation" for i in r["insts"]))
    (loc,) = [d for d in parse_decisions(rec["insts"], rec["decisions"], mbr_blocks())
              if d.inst == "SampleComputeLocation"]
    assert loc.block == "bias_add" and isinstance(loc.value, int) and loc.key == "bias_add:SampleComputeLocation"


def test_trace_parser_matches_the_plain_parser():
    parser = TraceParser(mbr_blocks())
    for rec in read_records(RUN):
        _, _, fast = parser.parse(rec["insts"], rec["decisions"])
        assert fast == parse_decisions(rec["insts"], rec["decisions"], mbr_blocks())


def test_label_sketches_keeps_labels_distinct():
    assert label_sketches([["a", "x"], ["a", "y"], ["a"]]) == ["x", "y", "tiling only"]
    assert label_sketches([["a"], ["a"]]) == ["tiling only", "tiling only (2)"]


def test_format_trace_inlines_decisions():
    rec = read_records(RUN)[0]
    text = format_trace(rec["insts"], rec["decisions"])
    assert 'sch.get_sblock(name="matmul", func_name="main")' in text
    assert f"decision={json.dumps(rec['decisions'][0][1])}" in text
    assert "# post-processing" in text


def test_feature_layout():
    assert len(fl.NAMES) == 164 and fl.INDEX["buf0_read"] == 57 and fl.INDEX["outer_prod"] == 161
    x = np.array([0.0, 1.0, 100.0, -3.0])
    raw = fl.unslog(np.sign(x) * np.log2(np.abs(x) + 1))
    assert np.allclose(raw, x)


def test_feature_cache_round_trip_and_bad_files(tmp_path):
    assert read_feature_cache(tmp_path) is None
    data = {"schema": "asight.features/1", "records": {0: {"n_rows": 0, "rows": b"", "stores": [], "blocks": {},
                                                         "error": "x"}}, "baselines": {}}
    write_feature_cache(tmp_path, data)
    assert read_feature_cache(tmp_path)["records"][0]["error"] == "x"
    (tmp_path / FEATURES_FILE).write_bytes(b"\x93garbage")
    assert read_feature_cache(tmp_path) is None
    (tmp_path / FEATURES_FILE).write_bytes(msgpack.packb({"schema": "other/1"}))
    assert read_feature_cache(tmp_path) is None


class FakeWorker:
    """Answers 'features' from the recorded cache and remembers what it was asked."""

    def __init__(self, cache: dict):
        self.cache = cache
        self.asked: list = []

    def request(self, method, params, timeout=None, on_event=None):
        assert method == "features"
        self.asked.append(list(params["trials"]))
        return {"schema": "asight.features/1", "feature_length": 164,
                "records": {t: self.cache["records"][t] for t in params["trials"]},
                "baselines": self.cache["baselines"]}


def test_ensure_features_extracts_only_missing_trials(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    full = read_feature_cache(run_dir)
    partial = dict(full, records={t: e for t, e in full["records"].items() if t < 25})
    write_feature_cache(run_dir, partial)
    worker = FakeWorker(full)
    cache = ensure_features(Run(run_dir), worker)
    assert worker.asked == [list(range(25, 40))]
    assert sorted(cache["records"]) == list(range(40))
    assert sorted(read_feature_cache(run_dir)["records"]) == list(range(40))
    ensure_features(Run(run_dir), worker)  # nothing missing: no request
    assert len(worker.asked) == 1


def test_synthetic_table_failed_records_are_not_valid():
    fn = build_outline(SOURCE).functions[0]
    records, cache = synthetic_run(200, seed=3, failed=0.1)
    table = build_candidates(records, cache, None, fn)
    assert len(table) == 200
    assert (~table.valid).sum() == sum(r["latency_us"] is None for r in records) > 0
    assert {s["label"] for s in table.sketches} == {"cache-write C + fuse C_global at C j0", "tiling only"}


def test_a_view_draws_at_most_its_limit_the_fastest_in_trial_order():
    """Red team round 10: 10,000 tiny records held a read-only view for 24 s; ~500,000 fit the records limit."""
    from asight_lsp.analysis.candidates import view_records
    records, _ = synthetic_run(200, seed=3, failed=0.1)
    same, note = view_records(records, limit=200)
    assert same is records and note is None
    kept, note = view_records(records, limit=50)
    measured = sorted(r["latency_us"] for r in records if r["latency_us"] is not None)
    assert len(kept) == 50 and [r["trial"] for r in kept] == sorted(r["trial"] for r in kept)
    assert max(r["latency_us"] for r in kept) == measured[49]
    assert note == "showing the 50 fastest of 200 candidates (a view draws at most 50)"


def test_a_function_edited_since_its_run_is_said_stale_in_every_views_notes(tmp_path):
    """After an edit the report and the loop-view, search-space and stage-graph panels say "stale" with the
    catalogue's reason, as the lens, hover and code view do; the payload's run carries the status."""
    from asight_lsp.services.run_data import load_run
    from asight_lsp.tvmscript.hashing import function_hash
    source = tmp_path / "matmul_bias_relu.py"
    text = (ROOT / "fixtures" / "matmul_bias_relu.py").read_text()
    source.write_text(text)
    shutil.copytree(RUN, tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    hashes = {fn.id: function_hash(text, fn) for fn in build_outline(text).functions}
    (tmp_path / "r" / "run.json").write_text(json.dumps({**meta, "file": str(source), "source_hashes": hashes}))
    assert not [n for n in load_run(str(tmp_path / "r"), extract=False).notes if "stale" in n]
    edited = text.replace('T.sblock("relu")', 'T.sblock("relu2")')
    data = load_run(str(tmp_path / "r"), extract=False, text=edited)
    stale = [n for n in data.notes if "stale" in n]
    assert stale == [f"⚠ stale: {meta['function']}'s source changed since run r: the "
                     "figures are the run's, of the source it tuned; tune it again for the current one"]
    assert (data.view.status, data.view.reasons) == ("stale", (f"{meta['function']}'s source changed since run r",))
