"""The HTML report: one self-contained file, strict CSP with a nonce, names escaped, all sections."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from asight_lsp.cli import main
from asight_lsp.views.report import report_html

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"
SOURCE = ROOT / "fixtures" / "matmul_bias_relu.py"
HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "r.html"
    assert main(["report", str(SOURCE), "--run", str(RUN), "-o", str(out), "--no-extract", "--no-hotspots"]) == 0
    return out.read_text()


def test_all_sections_present(report):
    for section in ("search-space", "loop-view", "stage-graph", "principles", "best-schedule"):
        assert f'<section id="{section}"' in report
    assert report.count('class="cell"') == len(json.loads(_data(report))["searchSpace"]["cells"])
    assert "sch.sample_perfect_tile" in report and "MatmulBiasRelu.main" in report


def _data(page: str) -> str:
    return re.search(r'<script type="application/json" id="asight-data" nonce="[^"]+">(.*?)</script>', page,
                     re.S).group(1)


def test_strict_csp_with_nonce_and_no_remote_content(report):
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', report).group(1)
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and len(nonce) >= 16
    for tag in re.findall(r"<(script|style)\b([^>]*)>", report):
        assert f'nonce="{nonce}"' in tag[1]
    assert not re.search(r'\sstyle="', report)  # inline style attributes would be blocked
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", report))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace only: nothing is fetched
    assert not re.search(r"""\s(src|href)\s*=\s*["'](?!#|url\(#)""", report)


def test_embedded_payloads_round_trip(report):
    data = json.loads(_data(report))
    assert set(data) == {"searchSpace", "loopView", "stageGraph", "principles"}
    assert data["searchSpace"]["schema"] == "asight.searchSpace/1"
    assert "</" not in _data(report)


def test_names_from_user_files_are_escaped():
    space = {"schema": "asight.searchSpace/1", "status": "unavailable", "message": HOSTILE,
             "run": {"function": HOSTILE, "id": HOSTILE, "file": HOSTILE}, "notes": [HOSTILE]}
    loops = {"schema": "asight.loopView/1", "status": "ok", "run": space["run"], "notes": [], "function": HOSTILE,
             "sources": {}, "stages": [{"block": HOSTILE, "iter_kinds": "SS", "candidates": 1, "loop_share": {},
                                        "strategies": {"tile": {HOSTILE: [{"value": HOSTILE, "count": 1, "share": 1.0}]},
                                                       **{k: [] for k in ("vectorize", "parallel", "unroll", "cache",
                                                                          "compute_at")}},
                                        "best": {"headline": HOSTILE, "steps": []}}]}
    graph = {"schema": "asight.stageGraph/1", "status": "ok", "run": space["run"], "notes": [], "function": HOSTILE,
             "nodes": [{"id": HOSTILE, "kind": "block", "label": HOSTILE, "layer": 0, "row": 0, "schedule": HOSTILE}],
             "edges": []}
    best = {"trial": 0, "latency_us": 1.0, "steps": {HOSTILE: [HOSTILE]}, "trace": HOSTILE + "</pre><script>x()</script>"}
    page = report_html({"searchSpace": space, "loopView": loops, "stageGraph": graph, "principles": None}, best)
    assert "<img" not in page and "<script>x()" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert json.loads(_data(page))["loopView"]["function"] == HOSTILE  # data kept, markup inert


def test_report_errors_are_one_line(tmp_path, capsys):
    code = main(["report", str(SOURCE), "--run", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html"),
                 "--no-extract", "--no-hotspots", "--work-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("asight: error: no run") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_the_default_run_of_a_report_is_the_files_own(tmp_path, capsys):
    """Outside probe 14, F1: `asight report FILE` reported the store's newest run, another file's function."""
    from asight_lsp.services.report import latest_of_file
    store = tmp_path / ".asight"
    own = store / "runs" / "mbr128"
    shutil.copytree(RUN, own)
    meta = json.loads((own / "run.json").read_text())
    (own / "run.json").write_text(json.dumps({**meta, "file": str(SOURCE), "created": 1000.0}))
    other = store / "runs" / "other-20260101-000000-0000"
    shutil.copytree(RUN, other)
    (other / "run.json").write_text(json.dumps({**meta, "file": str(tmp_path / "other.py"), "created": 2000.0}))
    assert latest_of_file(str(SOURCE), SOURCE.read_text(), str(store)) == "mbr128"
    code = main(["report", str(tmp_path / "other.py"), "-o", str(tmp_path / "r.html"), "--no-extract",
                 "--no-hotspots", "--work-dir", str(store)])
    assert code == 2 and "no such file" in capsys.readouterr().err
    (tmp_path / "third.py").write_text(SOURCE.read_text())
    code = main(["report", str(tmp_path / "third.py"), "-o", str(tmp_path / "r.html"), "--no-extract",
                 "--no-hotspots", "--work-dir", str(store)])
    assert code == 2 and "asight: error: no run of " in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_renders_in_headless_chromium_without_console_messages(report, tmp_path):
    page = tmp_path / "r.html"
    page.write_text(report)
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=90)
    assert "<svg" in proc.stdout and 'id="search-space"' in proc.stdout
    assert ":CONSOLE" not in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------- legible report (issue 16)

FIXTURES = ROOT / "vscode-extension" / "test" / "fixtures"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _legible_page(space: dict | None = None) -> str:
    payloads = {"searchSpace": space or _fixture("searchSpace"), "loopView": _fixture("loopView"),
                "stageGraph": _fixture("stageGraph"), "principles": _fixture("principles")}
    return report_html(payloads, hotspots=_fixture("hotspots"))


def test_categories_without_candidates_get_no_row_and_cells_carry_their_number():
    space = _fixture("searchSpace")
    space["categories"] = [{"id": 7, "label": "an empty design space", "count": 0}] + space["categories"]
    page = _legible_page(space)
    shown = page.replace(_data(page), "")   # the drawn page, without the embedded payloads
    assert not re.search(r"\b0 candidates", shown) and "an empty design space" not in shown
    numbers = {c["id"]: i + 1 for i, c in enumerate(c for c in space["categories"] if c["count"] > 0)}
    labels = re.findall(r'<text class="cell-label[^"]*"[^>]*>(\d+)</text>', page)
    assert labels == [str(numbers[c["category"]]) for c in space["cells"]]
    for cid, n in numbers.items():
        label = next(c["label"] for c in space["categories"] if c["id"] == cid)
        assert f'<li value="{n}">{label} — ' in page


def test_hotspots_say_how_each_block_was_linked_in_plain_words():
    page = _legible_page()
    section = page[page.index('<section id="hotspots">'):page.index('<section id="search-space">')]
    assert "linked by" in section and "same dataflow" in section
    assert ">graph<" not in section and ">match<" not in section


def test_loop_view_rows_show_the_median_latency_of_each_value():
    from asight_lsp.views.report import _fmt_us

    page = _legible_page()
    view = _fixture("loopView")
    for stage in view["stages"]:
        for value in stage["strategies"]["vectorize"][:6]:
            assert f'{_fmt_us(value["median_us"])} <span class="note">n={value["measured"]}</span>' in page


def test_stage_graph_has_costs_and_routed_paths():
    page = _legible_page()
    graph = _fixture("stageGraph")
    section = page[page.index('<section id="stage-graph">'):page.index('<section id="principles">')]
    assert section.count('class="sg-edge"') == len(graph["edges"])
    assert "<line" not in section, "edges are routed paths, not straight lines"
    for n in graph["nodes"]:
        if n["kind"] == "block":
            assert f"{n['cost']['share'] * 100:.1f}%" in section


def test_glossary_section_lists_the_terms():
    from asight_lsp.views.glossary import TERMS

    page = _legible_page()
    assert '<section id="glossary">' in page
    for term in TERMS:
        assert f"<dt>{html.escape(term)}</dt>" in page


def test_route_edge_never_enters_a_box():
    from asight_lsp.analysis.stagegraph import route_edge

    rows = {0: 2, 1: 4, 2: 3, 3: 4, 4: 1}
    boxes = {(layer, row): (30 + layer * 240, 30 + row * 80, 150, 50) for layer, n in rows.items() for row in range(n)}
    columns: dict[int, list] = {}
    for (layer, _), box in boxes.items():
        columns.setdefault(layer, []).append(box)
    inside = lambda b, x, y: b[0] + 0.5 < x < b[0] + b[2] - 0.5 and b[1] + 0.5 < y < b[1] + b[3] - 0.5  # noqa: E731
    crossed_straight = 0
    for (la, ra), a in boxes.items():
        for (lb, rb), b in boxes.items():
            if lb <= la:
                continue
            route = route_edge(a, b, (la, lb), (a[1] + 25, b[1] + 25), columns)
            pts = route["points"]
            assert pts[0] == (a[0] + a[2], a[1] + 25) and pts[-1] == (b[0], b[1] + 25)
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                for k in range(101):
                    x, y = x0 + (x1 - x0) * k / 100, y0 + (y1 - y0) * k / 100
                    assert not any(inside(box, x, y) for box in boxes.values()), (la, ra, lb, rb)
            (x0, y0), (x1, y1) = pts[0], pts[-1]
            crossed_straight += any(inside(box, x0 + (x1 - x0) * k / 100, y0 + (y1 - y0) * k / 100)
                                    for box in boxes.values() for k in range(101))
    assert crossed_straight > 10, "the case has many edges a straight line would draw through nodes"
