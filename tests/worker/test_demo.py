"""``asight demo`` (the README's main job) end to end with a tiny budget."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.tvm


def test_demo_tunes_profiles_and_writes_a_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "demo", "--work-dir", str(tmp_path), "--trials", "8",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["trials"] >= 8 and result["best_us"] < result["baseline_us"]
    assert Path(result["run_dir"], "database_tuning_record.json").exists()
    assert result["profile"]["summary"]["check_ok"] is True
    page = Path(result["report"]).read_text()
    for section in ('id="hotspots"', 'id="search-space"', 'id="loop-view"', 'id="stage-graph"', 'id="principles"',
                    'id="best-schedule"'):
        assert section in page
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:|url\(\s*["']?https?:|@import""", page)  # no remote content
