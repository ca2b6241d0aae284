"""Before → after per block (no TVM): untuned and tuned figures per source block from a profile,
slowed blocks flagged with what the best schedule did (the real trace of mbr128's best record),
in hovers, inlay hints, the CLI and the report."""
from __future__ import annotations

import time
from pathlib import Path

from asight_lsp.analysis.attribution import SLOWER_RATIO, before_after, block_verbs, schedule_verbs
from asight_lsp.analysis.trace_replay import source_blocks
from asight_lsp.analysis.trace_summary import summarize_trace
from asight_lsp.commands.profile import change_lines
from asight_lsp.server.hover import hover_markdown
from asight_lsp.server.inlay import block_hints
from asight_lsp.services.hotspots import schedule_of
from asight_lsp.services.results import FunctionResult, profile_blocks
from asight_lsp.services.catalogue import RunView
from asight_lsp.store.runs import RunMeta, read_records
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.views.report import _hotspots_section
from asight_lsp.views.text import change_text, ratio_text, slowed_lines

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MBR = (FIXTURES / "matmul_bias_relu.py").read_text()
RUN = FIXTURES / "runs" / "mbr128"


def entry(name, us, attribution="stage"):
    return {"id": f"MatmulBiasRelu.main/{name}", "name": name, "us": us, "share": None, "attribution": attribution}


def kernel():
    """Per-block figures shaped like ``finish_kernel``'s: relu got slower after tuning (the figures
    are made up for the test; the schedule that goes with them is mbr128's real best trace)."""
    return {"name": "main", "function": "MatmulBiasRelu.main",
            "blocks": {"baseline": [entry("matmul", 2680.0), entry("bias_add", 2.6), entry("relu", 1.20)],
                       "tuned": [entry("matmul", 66.0, "stage shared with bias_add (split by FLOPs)"),
                                 entry("bias_add", 0.26, "stage shared with matmul (split by FLOPs)"),
                                 entry("relu", 5.46)]},
            "stages": {"tuned": {"source": "rdtsc"}}}


def test_before_after_ratios_flags_and_estimates():
    got = {c["name"]: c for c in before_after(kernel())}
    assert got["relu"]["before_us"] == 1.20 and got["relu"]["after_us"] == 5.46
    assert abs(got["relu"]["ratio"] - 5.46 / 1.20) < 1e-9 and got["relu"]["slower"] and not got["relu"]["estimate"]
    assert not got["matmul"]["slower"] and got["matmul"]["estimate"]
    assert got["matmul"]["ratio"] < 1 / SLOWER_RATIO


def test_inlined_blocks_have_no_ratio():
    k = kernel()
    k["blocks"]["tuned"][1] = entry("bias_add", 0.0, "inlined into relu")
    got = {c["name"]: c for c in before_after(k)}
    assert got["bias_add"]["ratio"] is None and not got["bias_add"]["slower"]


def test_schedule_verbs_from_the_real_best_trace():
    fn = build_outline(MBR).functions[0]
    verbs = schedule_of(str(RUN), fn, None)
    records = [r for r in read_records(RUN) if r["latency_us"]]
    best = min(records, key=lambda r: r["latency_us"])
    steps = summarize_trace(best["insts"], best["decisions"], source_blocks(fn))["blocks"]["relu"]["steps"]
    assert schedule_verbs(steps) and set(schedule_verbs(steps)) <= set(verbs["relu"])   # sampled steps ⊆ all steps
    assert "parallel" in verbs["relu"] and "split" in verbs["matmul"]
    assert schedule_verbs(["split j → 96×8", "parallel i (128 iterations)", "x_init: vectorize j1 (width 8)",
                           "split k → 2×4"]) == ["split", "parallel", "vectorize"]


def test_text_of_a_change():
    relu = {c["name"]: c for c in before_after(kernel())}["relu"]
    assert change_text(relu, ["split", "parallel", "vectorize"]) == \
        "relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: split + parallel + vectorize"
    assert ratio_text(0.02) == "50× faster" and ratio_text(1.01) == "about the same"
    assert slowed_lines(before_after(kernel()), {"relu": ["parallel"]}) == \
        ["⚠ slower after tuning: relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: parallel"]


def result_with_profile() -> FunctionResult:
    fn = build_outline(MBR).functions[0]
    records = [r for r in read_records(RUN) if r["latency_us"]]
    best = min(records, key=lambda r: r["latency_us"])
    meta = RunMeta(id="mbr128", file="x.py", function=fn.id, state="done", trials_done=40, finished=time.time())
    profile = profile_blocks({"kernels": [kernel()]}, fn)
    return FunctionResult(fn.id, RunView(meta, Path("."), "fresh"), best,
                          summarize_trace(best["insts"], best["decisions"], source_blocks(fn)), profile)


def test_hover_flags_the_slowed_block_and_shows_before_after_of_the_others():
    fn = build_outline(MBR).functions[0]
    blocks = {b.name: b for b in fn.blocks}
    result = result_with_profile()
    verbs = " + ".join(block_verbs(result.block("relu")))
    assert verbs.startswith("fuse + split") and "parallel + vectorize" in verbs      # the post-processor's loops too
    relu = hover_markdown("block", fn, blocks["relu"], result)
    assert "- latency: untuned 1.2 µs → tuned 5.5 µs, 4.5× slower" in relu
    assert f"- **⚠ slower after tuning: relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: {verbs}**" in relu
    matmul = hover_markdown("block", fn, blocks["matmul"], result)
    assert "untuned 2.68 ms → tuned 66 µs, 41× faster" in matmul and "slower after tuning" not in matmul


def test_inlay_hint_marks_the_slowed_block():
    fn = build_outline(MBR).functions[0]
    hints = {fn.blocks[[b.name for b in fn.blocks].index(n)].range["start"]["line"]: n for n in ("matmul", "relu")}
    got = {line: (label, tip) for line, label, tip in block_hints(fn, result_with_profile())}
    relu_line = next(line for line, name in hints.items() if name == "relu")
    matmul_line = next(line for line, name in hints.items() if name == "matmul")
    assert "⚠ 1.2 µs → 5.5 µs" in got[relu_line][0] and got[relu_line][1].startswith("⚠ slower after tuning: relu")
    assert "2.68 ms → 66 µs" in got[matmul_line][0] and "⚠" not in got[matmul_line][0]


def test_report_and_cli_name_the_slowed_block():
    changes = before_after(kernel())
    for change in changes:
        change["schedule"] = ["fuse", "parallel", "vectorize"] if change["name"] == "relu" else ["split"]
    by_name = {c["name"]: c for c in changes}
    part = {"name": "main", "changes": changes,
            "entries": [{"rank": 1, "name": "matmul", "us": 66.0, "share": 0.9, "change": by_name["matmul"]},
                        {"rank": 2, "name": "relu", "us": 5.46, "share": 0.07, "change": by_name["relu"]}]}
    html = _hotspots_section({"parts": [part]}, None)
    assert "<th>untuned → tuned</th>" in html
    assert "<td class='change slower'>1.2 µs → 5.5 µs (4.5× slower)</td>" in html
    assert "⚠ slower after tuning: relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: fuse + parallel + vectorize" in html
    lines = change_lines(changes)
    assert lines[0].startswith("  per-block latency, untuned → tuned")
    assert "   ⚠ relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: fuse + parallel + vectorize" in lines
    assert any(line.startswith("     matmul 2.68 ms → 66 µs, 41× faster") for line in lines)


def test_rfactor_blocks_count_among_the_roots_children_so_normalize_keeps_its_schedule():
    """A real LayerNorm best record (fixtures/traces): after two rfactors the post-processor's
    get_child_blocks(root) returns 5 blocks; the replay must count the _rf blocks to find
    normalize's parallel + vectorize (it found nothing before)."""
    import json
    trace = json.loads((FIXTURES / "traces" / "layernorm_rfactor.json").read_text())
    text = (Path(__file__).resolve().parents[2] / "bench" / "workloads" / "layernorm.py").read_text()
    fn = build_outline(text).functions[0]
    blocks = summarize_trace(trace["insts"], trace["decisions"], source_blocks(fn))["blocks"]
    assert schedule_verbs(blocks["normalize"]["steps"]) == ["parallel", "vectorize"]
    assert block_verbs(blocks["normalize"]) == ["fuse", "split", "parallel", "vectorize"]   # post-processor loops
    assert blocks["sum_rf"]["derived_from"] == "sum" and blocks["sqsum_rf"]["derived_from"] == "sqsum"
    assert "rfactor" in schedule_verbs(blocks["sum"]["steps"])
