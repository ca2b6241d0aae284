"""A Relax plan puts the heaviest task first, so a short budget warms up where the time is."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.tvm]

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _plan(path: Path, unit: str):
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker import metaschedule as tuning
    from asight_lsp.worker.parse import parse_unit
    text = path.read_text(encoding="utf-8")
    outline = build_outline(text, str(path))
    spec = next({"start_line": u.start_line, "end_line": u.end_line} for u in outline.units if u.name == unit)
    parsed = parse_unit(text.splitlines(), spec, outline.constants, outline.aliases)
    return tuning.plan_for(parsed, None, tuning.resolve_target(None), off=frozenset())


def test_relax_tasks_heaviest_first():
    from asight_lsp.worker.programs import estimate_flops
    plan = _plan(FIX / "relax_cnn.py", "Net")
    work = [t.weight * (estimate_flops(t.mod) or 0.0) for t in plan.tasks]
    assert len(work) == 4 and work == sorted(work, reverse=True) and work[0] > work[-1] > 0
    assert plan.tasks[0].name.startswith("fused_conv2d")     # a convolution, not the mean or the dense
