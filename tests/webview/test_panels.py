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
