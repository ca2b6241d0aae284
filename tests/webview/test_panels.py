"""Each panel rendered from real payloads (fixtures of run mbr128) in headless Chromium."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "webview"   # where render.mjs saves its screenshots (see conftest)


def fixture(name: str) -> dict:
    return json.loads((ROOT / "vscode-extension" / "test" / "fixtures" / f"{name}.json").read_text())

HOSTILE = ['<img src=x onerror="window.__pwned=1">', "<script>window.__pwned=2</script>"]


def case(rendered: dict, name: str) -> dict:
    facts = rendered[name]
    assert "error" not in facts, facts.get("error")
    assert facts["pageErrors"] == [] and facts["consoleErrors"] == [], (facts["pageErrors"], facts["consoleErrors"])
    assert facts["violations"] == [], "the panel's own code broke its Content-Security-Policy"
    # Local resources only: the shell, its script and its stylesheet.
    shells = [r for r in facts["requests"] if r.startswith("/panel/")]
    assert len(shells) == 1 and set(facts["requests"]) - set(shells) <= {"/webview/main.js", "/webview/main.css"}, \
        facts["requests"]
    return facts


def test_search_space_draws_every_cell_with_legend_and_contours(rendered):
    payload = fixture("searchSpace")
    f = case(rendered, "searchSpace")
    assert f["cells"] == len(payload["cells"]) > 10
    assert f["contourLines"] == len(payload["contour"]["lines"]) > 0
    assert f["boundary"] and f["best"]
    assert f["fills"] == [c["color"] for c in payload["cells"][:3]], "cells are coloured by the payload's latency scale"
    assert f["categories"] == len(payload["categories"])
    for text in ("Legend", "Contours", "memory traffic", "model: MetaSchedule PerStoreFeature", "log scale"):
        assert text in f["legend"], text
    assert f["principles"] == len(fixture("principles")["principles"])
    assert f["runOptions"] == 2
    assert (ARTIFACTS / "search-space.png").stat().st_size > 20_000


def test_hover_shows_candidates_latency_and_category(rendered):
    payload = fixture("searchSpace")
    f = case(rendered, "searchSpace")
    big = next(c for c in payload["cells"] if c["id"] == f["bigCell"]["id"])
    labels = {c["id"]: c["label"] for c in payload["categories"]}
    assert f"{big['count']} candidates" in f["tooltip"]
    assert f"category: {labels[big['category']]}" in f["tooltip"]
    fastest = min(big["trials"], key=lambda t: payload["candidates"]["latency_us"][payload["candidates"]["trial"].index(t)])
    first = next(line for line in f["tooltip"].split("\n") if line.startswith("trial "))
    assert first.startswith(f"trial {fastest}: "), "candidates listed fastest first"


def test_click_lists_candidates_and_posts_open_and_compare(rendered):
    f = case(rendered, "searchSpace")
    assert f["rows"] == f["bigCell"]["count"] and f["selectedCells"] == 1
    assert f["selectedOutline"] == "none", "no focus ring (Chromium draws it in SVG user units: a huge disk)"
    assert f["compareDisabledAfterOne"] is True
    posted = f["posted"]
    compare = [m for m in posted if m["type"] == "compareCandidates"]
    opened = [m for m in posted if m["type"] == "openCandidate"]
    assert len(compare) == 1 and compare[0]["run"] == "mbr128" and len(set(compare[0]["trials"])) == 2
    assert len(opened) == 1 and opened[0]["run"] == "mbr128" and opened[0]["trial"] in fixture("searchSpace")["candidates"]["trial"]
    code = [m for m in posted if m["type"] == "showCandidateCode"]   # the second row's "code"
    assert len(code) == 1 and code[0]["run"] == "mbr128" and code[0]["trial"] != opened[0]["trial"]
    assert {"type": "selectRun", "run": "older"} in posted
    assert {"type": "state", "cell": f["bigCell"]["id"]} in posted
    assert f["fillsByCategory"] != f["fills"], "colour-by-category repaints the cells"


@pytest.mark.parametrize("kind", ["searchSpace", "loopView", "stageGraph", "hotspots"])
def test_hostile_names_are_text_and_never_run(rendered, kind):
    f = case(rendered, f"{kind}.hostile")
    assert f["pwned"] is None and f["dialogs"] == 0
    assert f["handlerAttrs"] == 0 and f["imgs"] == 0 and f["scripts"] == 1
    assert any(h in f["text"] for h in HOSTILE), "the hostile names are shown literally"
    if kind == "searchSpace":
        assert "<script>window.__pwned=2</script>" in f["tooltip"]


def test_loop_view_has_each_stage_and_strategy_and_jumps_to_source(rendered):
    payload = fixture("loopView")
    f = case(rendered, "loopView")
    assert f["stages"] == [s["block"] for s in payload["stages"]]
    assert {"tile", "vectorize", "parallel", "unroll", "cache", "compute_at", "loop_share"} <= set(f["strategies"])
    assert f["bars"] > 30
    share = payload["stages"][0]["loop_share"]["parallel"]
    assert abs(float(f["widths"][0].rstrip("%")) - share * 100) < 0.01, "bar width = the payload's share"
    rng = payload["stages"][0]["range"]
    assert {"type": "revealSource", "line": rng["start"]["line"], "character": rng["start"]["character"],
            "endLine": rng["end"]["line"], "uri": "file:///ws/fixtures/matmul_bias_relu.py"} in f["posted"]


def test_stage_graph_nodes_edges_and_click(rendered):
    payload = fixture("stageGraph")
    f = case(rendered, "stageGraph")
    assert f["nodes"] == len(payload["nodes"]) and f["edges"] == len(payload["edges"])
    assert f["blocks"] == [n["label"] for n in payload["nodes"] if n["kind"] == "block"]
    first = next(n for n in payload["nodes"] if n["kind"] == "block")
    assert any(m["type"] == "revealSource" and m["line"] == first["line"] for m in f["posted"])


def test_hotspots_ranked_and_jump_to_source(rendered):
    payload = fixture("hotspots")
    f = case(rendered, "hotspots")
    entries = sorted(payload["parts"][0]["entries"], key=lambda e: -e["us"])
    assert f["entries"] == [e["name"] for e in entries]
    rng = entries[0]["range"]
    assert any(m["type"] == "revealSource" and m["line"] == rng["start"]["line"] for m in f["posted"])


def test_unavailable_payload_shows_its_message(rendered):
    f = case(rendered, "unavailable")
    assert "no run yet: tune the function first" in f["text"]


def test_panel_follows_theme_and_restores_selected_cell(rendered):
    f = case(rendered, "themedRestored")
    assert f["background"] == "rgb(30, 30, 30)" and f["color"] == "rgb(204, 204, 204)"
    assert f["selected"] == [f["restoredCell"]] and f["rows"] >= 1
    assert f["state"]["cell"] == f["restoredCell"] and f["state"]["kind"] == "searchSpace"


# ---------------------------------------------------------------- legibility (issue 16)

def test_cells_carry_the_number_of_their_category_as_in_the_key(rendered):
    payload = fixture("searchSpace")
    f = case(rendered, "searchSpace.legible")
    cats = [c for c in payload["categories"] if c["count"] > 0]
    number = {c["id"]: str(i + 1) for i, c in enumerate(cats)}
    by_id = {c["id"]: c for c in payload["cells"]}
    assert len(f["cellsLatency"]) == len(payload["cells"])
    for cell in f["cellsLatency"]:
        assert cell["label"] == number[by_id[cell["id"]]["category"]], cell
        assert cell["labelShown"], "cells this size are big enough for their number"
    for key, c in zip(f["latency"]["keys"], cats):
        assert key.startswith(number[c["id"]]) and c["label"] in key and f"{c['count']} candidates" in key
    assert not any(k.endswith("(0 candidates)") for k in f["latency"]["keys"])


def test_legend_follows_the_colour_mode(rendered):
    f = case(rendered, "searchSpace.legible")
    assert f["latency"]["mode"] == "latency" and f["latency"]["gradientVisible"] is True
    assert not any(s["visible"] for s in f["latency"]["swatches"]), "no category colours while cells show latency"
    assert f["category"]["mode"] == "category" and f["category"]["gradientVisible"] is False, \
        "the latency scale is gone when cells are coloured by category"
    swatch = {s["category"]: s["color"] for s in f["category"]["swatches"]}
    assert all(s["visible"] for s in f["category"]["swatches"])
    payload = fixture("searchSpace")
    cat_of = {c["id"]: c["category"] for c in payload["cells"]}
    for cell in f["cellsCategory"]:
        assert cell["fill"] == swatch[cat_of[cell["id"]]], "each cell has its category's swatch colour"
    assert len({c["fill"] for c in f["cellsCategory"]}) == len(swatch)


def test_chart_fills_the_panel_width_and_follows_resizes(rendered):
    f = case(rendered, "searchSpace.legible")
    for key in ("size480", "size1200", "resized700", "resized1600"):
        size = f[key]
        assert abs(size["svgW"] - size["plotW"]) <= 1, (key, size)
        assert size["overflow"] <= 0, (key, "no horizontal scrolling")
    assert f["size480"]["svgW"] >= 480 - 2 * 16 - 2, "narrow panels: the legend goes below, the chart keeps the width"
    assert abs(f["size480"]["sideW"] - f["size480"]["svgW"]) <= 1, "…and the legend below it is as wide"
    assert f["size1200"]["sideW"] < f["size1200"]["svgW"], "wide panels: legend beside the chart"
    assert f["size1200"]["svgW"] > 1.5 * f["size480"]["svgW"]
    assert f["resized1600"]["svgW"] > f["resized700"]["svgW"] and f["resized1600"]["svgH"] >= f["resized700"]["svgH"]


@pytest.mark.parametrize("name", ["stageGraph.routes", "stageGraph.skip"])
def test_stage_graph_edges_go_around_nodes(rendered, name):
    f = case(rendered, name)
    assert f["samples"] > 100
    assert f["crossings"] == [], f["crossings"]
    if name == "stageGraph.skip":
        assert len(f["straightCrossings"]) >= 2, "the case is one where straight edges would cross nodes"


def test_stage_graph_shows_each_stages_measured_cost_or_says_there_is_none(rendered):
    from asight_lsp.views.text import format_latency

    payload = fixture("stageGraph")
    f = case(rendered, "stageGraph.routes")
    blocks = [n for n in payload["nodes"] if n["kind"] == "block"]
    assert blocks and all(n["cost"]["us"] is not None for n in blocks), "the fixture run was profiled"
    for n in blocks:
        assert f["costs"][n["id"]].startswith(format_latency(n["cost"]["us"]) + " · "), f["costs"]
        assert abs(f["costBars"][n["id"]] - max(1, n["cost"]["share"] * 170)) < 0.01
    skip = case(rendered, "stageGraph.skip")
    assert skip["costs"]["c"] == "no measurement" and skip["costs"]["f"] == "no measurement"
    assert skip["costBars"]["c"] is None and skip["costs"]["a"] == "10 µs · 50 %"


def test_loop_view_shows_median_latency_per_strategy_value(rendered):
    from asight_lsp.views.text import format_latency

    payload = fixture("loopView")
    f = case(rendered, "loopView.latency")
    assert f["overflow"] <= 0, "a 480 px panel does not scroll sideways"
    checked = 0
    for stage, shown in zip(payload["stages"], f["rows"]):
        assert shown["block"] == stage["block"]
        for name in ("vectorize", "parallel", "unroll", "cache", "compute_at"):
            values = stage["strategies"][name]
            rows = shown["strategies"][name]
            assert len(rows) == len(values)
            for v, row in zip(values, rows):
                assert row["median"].startswith(f"median {format_latency(v['median_us'])} (n={v['measured']})"), row
                checked += 1
            eligible = [v for v in values if v["measured"] >= 3 and v["value"] != "other"]
            marked = [r["label"] for r in rows if r["fastest"]]
            if len(eligible) >= 2:
                assert marked == [str(min(eligible, key=lambda v: v["median_us"])["value"])]
            else:
                assert marked == []
        for var, values in stage["strategies"]["tile"].items():
            eligible = [v for v in values if v["measured"] >= 3 and v["value"] != "other"]
            want = [str(min(eligible, key=lambda v: v["median_us"])["value"])] if len(eligible) >= 2 else []
            assert shown["tiles"][var] == want, (stage["block"], var, "'other' pools values: never the fastest")
    assert checked > 30


@pytest.mark.parametrize("name", ["searchSpace", "loopView", "stageGraph", "hotspots"])
def test_each_panel_has_a_glossary_of_its_terms_in_plain_words(rendered, name):
    from asight_lsp.views.glossary import TERMS

    f = case(rendered, name)
    assert len(f["glossary"]) >= 4
    for term, text in f["glossary"]:
        assert TERMS[term] == text, term


def test_hotspots_say_how_blocks_were_linked_in_plain_words(rendered):
    f = case(rendered, "hotspots")
    assert "linked by same dataflow" in f["text"]
    assert "matched by graph" not in f["text"]


@pytest.mark.parametrize("width", [200, 480, 1000, 1400])
def test_a_models_long_chain_fits_the_panel_width(rendered, width):
    """Issue 23: a model's stage graph flows top-down, so a chain of 28 kernel calls (with branches side by
    side) never scrolls sideways at 480-1400 px, its edges still go around the boxes, and its text stays
    readable; the panel says when its run has a newer measurement, with a Refresh."""
    f = case(rendered, f"stageGraph.chain.{width}")
    assert f["kernels"] == 35 and f["edges"] >= 35, (f["kernels"], f["edges"])
    assert f["pageOverflow"] <= 0 and f["graphOverflow"] <= 0, (f["pageOverflow"], f["graphOverflow"])
    assert f["svgHeight"] > f["svgWidth"] * 4, (f["svgWidth"], f["svgHeight"])    # it grows downwards
    if width >= 480:                                   # not shrunk to unreadable (at 200 px a branch's layer shrinks)
        assert f["labelPx"] >= 10, f["labelPx"]
    assert f["crossings"] == [], f["crossings"][:5]
    assert f["newer"].startswith("A newer measurement (26 Nov 09:41:18 UTC, the editor's Re-measure, quiet")
    assert f["newerButton"] and {"type": "refresh"} in f["posted"]
