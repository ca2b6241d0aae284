"""``asight space / loops / principles`` on the recorded run (no TVM: features come from the cache)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from asight_lsp.cli import main

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """A store holding the recorded run; the cwd is the repo root so the run's source resolves."""
    shutil.copytree(RUN, tmp_path / "runs" / "mbr128-20260101-000000-abcd")
    monkeypatch.chdir(ROOT)
    return tmp_path


def test_space_json(store, capsys):
    assert main(["space", "--run", "latest", "--work-dir", str(store), "--no-extract", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema"] == "asight.searchSpace/1" and payload["status"] == "ok"
    assert payload["run"]["id"] == "mbr128-20260101-000000-abcd" and len(payload["candidates"]["trial"]) == 40


def test_space_text_and_png(store, tmp_path, capsys):
    assert main(["space", "--run", "mbr128", "--work-dir", str(store), "--no-extract"]) == 0
    out = capsys.readouterr().out
    assert "best: trial 7 " in out and "categories (sketch of origin)" in out and "contour:" in out
    assert "contour model vs measurement: The model agrees with the measurement (rank correlation" in out
    png = tmp_path / "s.png"
    assert main(["space", "--run", "mbr128", "--work-dir", str(store), "--no-extract", "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_loops_and_principles(store, capsys):
    assert main(["loops", "--run", "latest", "--work-dir", str(store), "--no-extract", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["loopView"]["schema"] == "asight.loopView/1" and both["stageGraph"]["schema"] == "asight.stageGraph/1"
    assert main(["loops", "--run", "latest", "--work-dir", str(store), "--no-extract"]) == 0
    text = capsys.readouterr().out
    assert "stage matmul [SSR]" in text and "matmul --C--> bias_add" in text
    from asight_lsp.views.text import format_latency

    cache = both["loopView"]["stages"][0]["strategies"]["cache"][0]
    assert f"cache: {cache['value']} 100% (median {format_latency(cache['median_us'])})" in text, \
        "each value's median latency next to its share"
    assert "  matmul: no measurement" in text, "the recorded run has no profile: the stage graph says so"
    assert main(["principles", "--run", "latest", "--work-dir", str(store), "--no-extract"]) == 0
    assert "design principles of MatmulBiasRelu.main" in capsys.readouterr().out


def test_unknown_run_is_a_one_line_error(store, capsys):
    assert main(["space", "--run", "zzz", "--work-dir", str(store), "--no-extract"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("asight: error: no run 'zzz'") and err.count("\n") == 1


def test_run_without_records_is_a_one_line_error(store, capsys):
    empty = store / "runs" / "empty"
    empty.mkdir()
    shutil.copy(RUN / "run.json", empty / "run.json")
    assert main(["space", "--run", str(empty), "--no-extract"]) == 2
    assert "no measured candidate" in capsys.readouterr().err
