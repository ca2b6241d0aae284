"""RunIndex and Results: which run speaks for a function (fresh / stale / live), incremental records, text formats."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import measured

from asight_lsp.services.results import profile_blocks
from asight_lsp.services.catalogue import RunView
from asight_lsp.store.runs import Run, RunMeta
from asight_lsp.tvmscript.hashing import function_hash
from asight_lsp.services.results import Results
from asight_lsp.store.index import RunIndex
from asight_lsp.views.text import format_latency, relative_time
from asight_lsp.server.lens import result_lens_title
from asight_lsp.views.runs import run_summary
from asight_lsp.tvmscript.outline import build_outline

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def store(tmp_path):
    source = tmp_path / "matmul_bias_relu.py"
    shutil.copy(FIXTURES / "matmul_bias_relu.py", source)
    text = source.read_text()
    fn = build_outline(text, str(source)).functions[0]
    return tmp_path / ".asight", source, text, fn


def add_run(root: Path, run_id: str, source: Path, fn_id: str, hash_: str, state="done", created=None,
            records: bool = True, best_us=115.0) -> Run:
    dest = root / "runs" / run_id
    shutil.copytree(FIXTURES / "runs" / "mbr128", dest) if records else dest.mkdir(parents=True)
    meta = RunMeta(id=run_id, file=str(source), function=fn_id, source_hashes={fn_id: hash_}, state=state,
                   trials_requested=40, trials_done=40 if records else 0, best_us=best_us if records else None,
                   baseline_us=2706.0, created=created or time.time(), finished=time.time() - 120)
    Run(dest).save(meta)
    return Run(dest)


def test_fresh_run_beats_newer_stale_and_live_beats_all(store):
    root, source, text, fn = store
    current = function_hash(text, fn)
    add_run(root, "old-fresh", source, fn.id, current, created=1000)
    add_run(root, "new-stale", source, fn.id, "0" * 16, created=2000)
    index = Results(RunIndex(root, min_interval=0))
    result = index.result(str(source), fn, current)
    assert result.meta.id == "old-fresh" and not result.stale
    assert result.summary["blocks"]["matmul"]["splits"]["k"]  # the trace summary of its best record
    assert result.best["latency_us"] == pytest.approx(min(
        r for r in [json.loads(line)[1][1][0] * 1e6 for line in
                    (FIXTURES / "runs/mbr128/database_tuning_record.json").read_text().splitlines()]))
    # the function changed: only stale runs are left, the newest is shown, marked stale
    stale = index.result(str(source), fn, "f" * 16)
    assert stale.meta.id == "new-stale" and stale.stale
    # a live run of the current source wins (its lens shows progress)
    add_run(root, "live", source, fn.id, current, state="running", created=3000, records=False)
    live = index.result(str(source), fn, current)
    assert live.meta.id == "live" and live.running and live.best is None
    assert result_lens_title(live).startswith("⟳ tuning 0/40 trials")


def test_other_files_and_functions_are_ignored(store, tmp_path):
    root, source, text, fn = store
    add_run(root, "elsewhere", tmp_path / "other.py", fn.id, function_hash(text, fn))
    add_run(root, "other-fn", source, "Other.main", "1" * 16)
    assert Results(RunIndex(root, min_interval=0)).result(str(source), fn, function_hash(text, fn)) is None


def test_records_are_read_incrementally_and_a_torn_line_waits(store):
    root, source, text, fn = store
    run = add_run(root, "r", source, fn.id, function_hash(text, fn))
    lines = run.records_path.read_text().splitlines()
    run.records_path.write_text(lines[0] + "\n" + lines[1][:50])  # a job writing its second line
    index = RunIndex(root, min_interval=0)
    first = index.best_record("r", fn)
    assert first["trial"] == 0
    with run.records_path.open("w") as stream:
        stream.write("\n".join(lines) + "\n")
    best = index.best_record("r", fn)
    latencies = [json.loads(line)[1][1][0] * 1e6 for line in lines]
    assert best["trial"] == latencies.index(min(latencies)) and best["latency_us"] == pytest.approx(min(latencies))


def test_index_notices_new_and_changed_run_json(store):
    root, source, text, fn = store
    index = RunIndex(root, min_interval=0)
    assert index.metas() == []
    run = add_run(root, "a", source, fn.id, "x")
    assert [m.id for m in index.metas()] == ["a"]
    time.sleep(0.01)
    run.update(state="failed", error="boom")
    assert index.get("a").state == "failed"
    shutil.rmtree(run.path)
    assert index.get("a") is None


def test_formats():
    assert format_latency(5.9159) == "5.9 µs" and format_latency(57.8) == "58 µs"
    assert format_latency(195.0) == "0.20 ms" and format_latency(21500.0) == "21.5 ms"
    assert format_latency(1.5e6) == "1.50 s" and format_latency(None) == "—"
    now = 10_000.0
    assert relative_time(now - 10, now) == "just now" and relative_time(now - 180, now) == "3 min ago"
    assert relative_time(now - 7200, now) == "2 h ago" and relative_time(None) == ""


def test_result_lens_title_and_summary():
    from asight_lsp.server.lens import result_lens_tooltip
    record = measured(21400.0, 200.0)
    meta = RunMeta(id="r", file="f.py", function="main", state="done", trials_done=128, trials_requested=128,
                   best_us=200.0, baseline_us=21400.0, measurement=record, finished=time.time() - 180)
    from asight_lsp.services.results import FunctionResult
    result = FunctionResult("main", RunView(meta, Path("."), "fresh"))
    assert result_lens_title(result) == "0.20 ms · 107× vs untuned · 128 trials · 3 min ago"
    result.view = RunView(meta, Path("."), "stale", ("main's source changed since run r",))
    assert result_lens_title(result).startswith("⚠ stale · 0.20 ms")
    assert result_lens_tooltip(result).startswith("Stale: main's source changed since run r; ")
    summary = run_summary(meta, stale=True)
    assert summary["speedup"] == pytest.approx(107.0) and summary["stale"] is True and summary["bestUs"] == 200.0
    assert summary["headline"] == "0.20 ms · 107× vs untuned" and summary["verdict"] == "faster"
    assert summary["speedupCi"][0] < 107.0 < summary["speedupCi"][1] and summary["noisy"] is False


def test_lens_says_what_the_record_says_and_how_it_was_taken():
    from asight_lsp.server.lens import result_lens_tooltip
    from asight_lsp.services.results import FunctionResult

    def lens(record, **meta_fields):
        meta = RunMeta(id="r", file="f.py", function="main", state="done", trials_done=32, trials_requested=32,
                       measurement=record, finished=time.time(), **meta_fields)
        result = FunctionResult("main", RunView(meta, Path("."), "fresh"))
        return result_lens_title(result), result_lens_tooltip(result)

    title, tip = lens(measured(57.0, 56.5, spread=0.05))   # no measurable difference
    assert title.startswith("56 µs · ≈ untuned (no measurable difference)") and "95% CI" in tip
    title, tip = lens(measured(27.0, 57.0))                # really slower: said plainly
    assert "2.1× slower than untuned" in title and "keep the untuned build" in tip
    title, tip = lens(measured(2000.0, 100.0, busy=True))
    assert "· noisy ·" in title and "busy" in tip and "--remeasure" in tip
    title, tip = lens(None, best_us=61.0)                  # cancelled before the re-measurement
    assert title.startswith("best 61 µs while tuning (not re-measured)") and tip is None
    title, _ = lens(None, best_us=134.6, extra={"adopted": {"records": 32, "measured": 30}})   # tuned elsewhere
    assert title.startswith("best 0.13 ms on the machine that tuned it (adopted, not re-measured) · 30 of 32 "
                            "trials measured")


def test_profile_blocks_prefers_the_tuned_program():
    fn = build_outline((FIXTURES / "matmul64.py").read_text()).functions[0]
    profile = {"kernels": [{"function": "matmul64", "stages": {"tuned": {"source": "rdtsc"}},
                            "blocks": {"baseline": [{"name": "C", "us": 100.0, "share": 1.0}],
                                       "tuned": [{"name": "C", "us": 6.0, "share": 1.0, "attribution": "stage"}]}}]}
    blocks = profile_blocks(profile, fn)
    change = blocks["C"].pop("change")
    assert blocks == {"C": {"us": 6.0, "share": 1.0, "program": "tuned", "source": "tuned program, rdtsc"}}
    assert (change["before_us"], change["after_us"], change["slower"]) == (100.0, 6.0, False)   # untuned → tuned
    assert profile_blocks({"kernels": []}, fn) is None and profile_blocks(None, fn) is None


def test_an_adopted_run_edited_since_shows_no_figure_in_lens_hover_or_run_list(store):
    """Outside probe 6, N1: run.json's best_us edited to 2 µs after adopt was the lens's, the hover's and
    asight/runs' "best 2.0 µs" (the index reads run.json); the code, space and report views refused."""
    from asight_lsp.server.hover import run_line
    from asight_lsp.server.lens import result_lens, scheduled_code_lens
    from asight_lsp.views.runs import runs_payload
    root, source, text, fn = store
    run = add_run(root, "adopted", source, fn.id, function_hash(text, fn))
    meta = run.load()
    best = min(json.loads(line)[1][1][0] * 1e6 for line in
               (run.path / "database_tuning_record.json").read_text().splitlines())
    meta.best_us, meta.extra["adopted"] = best, {"workload": 0, "flops": None, "dtypes": ["float32"]}
    run.save(meta)
    results = Results(RunIndex(root, min_interval=0))
    held = results.result(str(source), fn, function_hash(text, fn))
    assert held.refused is None and held.best["latency_us"] == pytest.approx(best)
    assert "adopted, not re-measured" in result_lens_title(held)
    meta.best_us = 2.0
    time.sleep(0.01)
    run.save(meta)
    edited = results.result(str(source), fn, function_hash(text, fn))
    assert edited.refused.startswith("run adopted: run.json's best (2.0 µs) is not its records'")
    assert edited.best is None and edited.summary is None
    title, tooltip = result_lens(str(source), fn, edited, 0)[1], result_lens(str(source), fn, edited, 0)[4]
    assert title == "⚠ run adopted not used: its files changed after adopt" and tooltip == edited.refused
    assert scheduled_code_lens(str(source), fn, edited, 0) is None
    assert "2.0 µs" not in run_line(edited).split("not used")[0] and "not used: run adopted: run.json's best" in run_line(edited)
    listed = runs_payload([edited.meta], {"adopted": edited.view}, None, {"adopted": results.refusal(edited.meta)})["runs"][0]
    assert listed["bestUs"] is None and listed["headline"].startswith("not used: run adopted: run.json's best")
    assert listed["status"] == "fresh" and listed["stale"] is False


def test_a_block_named_otherwise_than_in_the_records_is_said_in_hover_and_hint_not_left_blank(store):
    """Outside probe 12, F3: a block renamed before adopt (structural matching ignores names): the hover
    said "the best schedule did not change this block", the inlay hint was empty."""
    from asight_lsp.server.hover import block_run_lines
    from asight_lsp.server.inlay import block_hints
    root, source, text, _ = store
    renamed = text.replace('T.sblock("matmul")', 'T.sblock("mm")')
    source.write_text(renamed)
    fn = build_outline(renamed, str(source)).functions[0]
    add_run(root, "adopted", source, fn.id, function_hash(renamed, fn))
    result = Results(RunIndex(root, min_interval=0)).result(str(source), fn, function_hash(renamed, fn))
    assert result.blocks_gone == ["matmul"] and not result.stale
    said = ("the records of run adopted get block matmul, which this function does not have (the same computation "
            "with its blocks named otherwise: structural matching ignores names)")
    mm = next(b for b in fn.blocks if b.name == "mm")
    lines = block_run_lines(result, mm)
    assert any(line.startswith(f"- ⚠ {said}") for line in lines)
    assert "- the best schedule did not change this block" not in lines
    hint = next(h for h in block_hints(fn, result) if h[0] == mm.range["start"]["line"])
    assert hint[1] == "⚠ not in the run's records (they get matmul)" and hint[2].startswith(said)
    untouched = build_outline(text, str(source)).functions[0]       # the records' names: nothing to say
    assert Results(RunIndex(root, min_interval=0)).result(str(source), untouched, "x" * 16).blocks_gone is None
