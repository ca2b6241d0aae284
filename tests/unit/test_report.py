"""The HTML report: one self-contained file, strict CSP with a nonce, names escaped, all sections."""
from __future__ import annotations

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


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_renders_in_headless_chromium_without_console_messages(report, tmp_path):
    page = tmp_path / "r.html"
    page.write_text(report)
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=90)
    assert "<svg" in proc.stdout and 'id="search-space"' in proc.stdout
    assert ":CONSOLE" not in proc.stderr, proc.stderr[-2000:]
