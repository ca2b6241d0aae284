"""``asight adopt``'s checks that need no TVM (services/adopt.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.services.adopt import require_prim_func
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.selection import select

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_a_relax_model_is_refused_with_what_adopt_takes():
    """Outside probe F9: "pick one PrimFunc of the unit ()"."""
    path = FIXTURES / "relax_cnn.py"
    outline = build_outline(path.read_text(), str(path))
    with pytest.raises(AsightError, match=r"relax_cnn.py: adopt takes a TIR function \(a PrimFunc\) tuned elsewhere; "
                                          r"Net.main is a Relax model: adopt does not take models"):
        require_prim_func(select(outline, None), str(path))
    tir = FIXTURES / "gpu" / "matmul1024.py"
    outline = build_outline(tir.read_text(), str(tir))
    require_prim_func(select(outline, None), str(tir))
