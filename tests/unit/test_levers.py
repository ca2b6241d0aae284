"""The lever switches of issue 21 (analysis/levers.py), without TVM."""
import pytest

from asight_lsp.analysis import levers


def test_every_lever_on_by_default_and_off_by_name():
    assert levers.levers_off(None) == set()
    assert levers.levers_off("") == set()
    assert levers.levers_off(" twins, layout ") == {"twins", "layout"}


def test_an_unknown_lever_is_refused_not_ignored():
    with pytest.raises(ValueError, match="unknown lever.*layuot"):
        levers.levers_off("layuot")


@pytest.mark.parametrize("kind,off,expected", [
    ("llvm", set(), True),            # a CPU build packs weights into its schedules' layouts
    ("c", set(), True),
    ("llvm", {"layout"}, False),      # the ablation's -layout
    ("llvm", {"twins"}, True),
    ("cuda", set(), False),           # GPU: weights keep their layout (DLight fallback)
])
def test_weight_prepack_rule(kind, off, expected):
    assert levers.prepacks(kind, off) is expected
