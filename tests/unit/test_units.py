"""No "us" where a user reads a latency (issue 23): µs or ms, one unit per table.

Two checks: the message builders of the model path (``asight model``'s table, outlook and kept
defaults, the export's refusal lines, the twins line), called with real payload shapes; and a scan
of the sources a user-facing text is written in (asight_lsp/, vscode-extension/src), so a new
``f"{x:.1f} us"`` anywhere fails here."""
from __future__ import annotations

import re
from pathlib import Path

from asight_lsp.views.model import model_view

ROOT = Path(__file__).resolve().parents[2]
# a figure followed by the ASCII unit: "12.5 us", "{value:.1f} us", "' us'", "3us"
US = re.compile(r"(?:\d|\}) ?us\b|['\"`] us\b")
FIGURE_US = re.compile(r"\d(\.\d+)? ?us\b")


def _profile() -> dict:
    calls = {"big": 2500.0, "small": 4.2}
    return {"relax": {
        "function": "main",
        "tasks": {"baseline": {"tasks": [{"task": t, "us": us * 2, "vars": [f"v_{t}"]} for t, us in calls.items()]},
                  "tuned": {"tasks": [{"task": t, "us": us, "vars": [f"v_{t}"], "lines": [1, 2]}
                                      for t, us in calls.items()]}},
        "baseline": {"median_us": 5100.0}, "tuned": {"median_us": 2600.0}, "speedup": 1.96,
        "task_records": {"big": {"trials": 4}, "small": {"trials": 2}}},
        "measurement": {"defaults": [{"task": "small", "default_us": 4.0, "measured_us": 9.5}]}}


def test_asight_model_text_has_no_us_and_one_unit_per_table():
    from asight_lsp.commands.model import render
    view = model_view(_profile(), tuning={"budget": {"outlook": [
        {"task": "big", "expectedSavingUs": 12.5, "expectedSavingShare": 0.004, "trials": 4, "share": 0.9, "batch": 2}]}})
    text = render(view)
    assert not FIGURE_US.search(text), text
    assert "~12 µs saved" in text and "default schedule kept (4.0 µs vs best trial 9.5 µs" in text, text
    rows = [line for line in text.splitlines() if line.startswith(("big ", "small "))]
    units = {u for line in rows for u in re.findall(r"\d (µs|ms)\b", line.split("  default")[0])}   # the columns
    assert len(rows) == 2 and units == {"ms"}, rows          # 4.2 µs and 2500 µs in one table: both in ms


def test_export_and_twins_messages_have_no_us():
    from asight_lsp.analysis.deployable import missing_lines, refusal_text
    from asight_lsp.analysis.twins import describe
    applied = {"missing": ["fused_a", "fused_b"], "missing_cost": [
        {"kernel": "fused_a", "calls": 2, "us": 35.5, "share": 0.4}, {"kernel": "fused_b", "calls": 1, "us": 2400.0, "share": 0.6}]}
    text = "\n".join(missing_lines(applied)) + "\n" + refusal_text(applied, 4)
    assert not FIGURE_US.search(text) and "35.5 µs" in text, text
    entry = {"twins": ["b"], "siblings": [], "adopted": 1, "transfers": [
        {"from": "b", "relation": "twin", "latencyUs": 3.2, "ownBestUs": 9.9, "gain": 3.1}]}
    line = describe("a", entry)
    assert not FIGURE_US.search(line) and "3.2 µs" in line, line


def test_no_ascii_us_unit_in_user_facing_sources():
    hits = []
    files = [*ROOT.joinpath("asight_lsp").rglob("*.py"), *ROOT.joinpath("vscode-extension", "src").rglob("*.ts")]
    for path in files:
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0] if path.suffix == ".py" else line.split("//", 1)[0]
            if US.search(code) and re.search(r"['\"`]", code):
                hits.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not hits, "write µs (or ms), not us:\n" + "\n".join(hits)
