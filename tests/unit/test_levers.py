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


@pytest.mark.parametrize("kind,off,expected", [
    ("llvm", set(), {"relax.nn.conv2d": ["NHWC", "OHWI"]}),   # a CPU tunes its convolutions channels-last
    ("llvm", {"layout"}, {"relax.nn.conv2d": ["NHWC", "OHWI"]}),
    ("llvm", {"nhwc"}, None),         # the ablation's -nhwc: the model's own layout
    ("cuda", set(), None),            # GPU: the model's layout (DLight fallback)
])
def test_channels_last_rule(kind, off, expected):
    assert levers.channels_last(kind, off) == expected


def test_channels_last_layouts_are_a_copy():
    levers.channels_last("llvm", set())["relax.nn.conv2d"] = ["NCHW", "OIHW"]
    assert levers.channels_last("llvm", set()) == {"relax.nn.conv2d": ["NHWC", "OHWI"]}


def test_a_run_keeps_the_layouts_it_was_tuned_with():
    # recorded: the pipeline levers come from the run, the others from now
    assert levers.run_levers_off(["nhwc", "twins"], {"budget"}, None) == {"nhwc", "budget"}
    assert levers.run_levers_off([], {"nhwc", "layout", "default"}, None) == {"default"}


def test_a_run_made_before_the_record_had_no_channels_last_and_packs_only_if_its_workloads_say_so():
    marked = '{"attrs": {"layout_free_buffers": [1]}}'
    assert levers.run_levers_off(None, set(), marked) == {"nhwc"}
    assert levers.run_levers_off(None, set(), '{"attrs": {}}') == {"nhwc", "layout"}
    assert levers.run_levers_off(None, {"twins"}, None) == {"nhwc", "layout", "twins"}


@pytest.mark.parametrize("kind,off,expected", [
    ("llvm", set(), True),            # a model's tasks on a CPU: candidates re-measured with flushed inputs
    ("c", set(), True),
    ("llvm", {"cold"}, False),        # the ablation's -cold: warm re-measurement, remeasure.TOP_K candidates
    ("llvm", {"layout", "nhwc"}, True),
    ("cuda", set(), False),           # the flush is TVM's CPU function; a GPU keeps the warm harness
])
def test_cold_remeasure_rule(kind, off, expected):
    assert levers.cold_remeasure(kind, off) is expected


def test_cold_is_a_lever_the_ablation_can_name():
    assert levers.levers_off("cold") == {"cold"}
    assert levers.COLD_TOP_K > 5      # more candidates than the warm re-measurement's five
