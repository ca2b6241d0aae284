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
    known = list(levers.PIPELINE)
    assert levers.run_levers_off(["nhwc", "twins"], {"budget"}, None, known) == {"nhwc", "budget"}
    assert levers.run_levers_off([], {"nhwc", "layout", "default", "winograd"}, None, known) == {"default"}
    assert levers.run_levers_off(["winograd"], set(), None, known) == {"winograd"}


def test_a_pipeline_lever_newer_than_the_run_was_off_for_it():
    # a run.json without the known list was made before the Winograd lever: its convolutions are direct
    assert levers.run_levers_off([], set(), None) == {"winograd"}
    assert levers.run_levers_off(["nhwc", "twins"], {"budget"}, None) == {"nhwc", "budget", "winograd"}
    assert levers.run_levers_off([], set(), None, ["layout", "nhwc"]) == {"winograd"}


def test_a_run_made_before_the_record_had_no_channels_last_and_packs_only_if_its_workloads_say_so():
    marked = '{"attrs": {"layout_free_buffers": [1]}}'
    assert levers.run_levers_off(None, set(), marked) == {"nhwc", "winograd"}
    assert levers.run_levers_off(None, set(), '{"attrs": {}}') == {"nhwc", "layout", "winograd"}
    assert levers.run_levers_off(None, {"twins"}, None) == {"nhwc", "layout", "twins", "winograd"}


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


@pytest.mark.parametrize("kind,off,expected", [
    ("llvm", set(), True),            # a CPU computes the convolutions that fit as Winograd
    ("c", set(), True),
    ("llvm", {"winograd"}, False),    # the ablation's -winograd
    ("llvm", {"nhwc"}, False),        # it rewrites the channels-last form only
    ("cuda", set(), False),
])
def test_winograd_rule(kind, off, expected):
    assert levers.winograd(kind, off) is expected


def _conv(**change) -> dict:
    # ResNet-18's stage-3 3x3 convolution, channels-last
    conv = {"layouts": ("NHWC", "OHWI", "NHWC"), "dtype": "float32", "kernel": (3, 3), "strides": [1, 1],
            "dilation": [1, 1], "groups": 1, "out": [1, 14, 14, 256], "in_channels": 256}
    conv.update(change)
    return conv


def test_a_large_3x3_convolution_of_stride_1_fits_winograd():
    assert levers.winograd_fits(_conv())
    assert levers.winograd_fits(_conv(out=[1, 56, 56, 64], in_channels=64))     # stage 1: 116 M MACs


@pytest.mark.parametrize("change", [
    {"strides": [2, 2]},                          # a strided convolution: Winograd tiles assume stride 1
    {"kernel": (1, 1)}, {"kernel": (7, 7)},       # F(4x4, 3x3) is for 3x3 kernels
    {"dilation": [2, 2]}, {"groups": 2},
    {"layouts": ("NCHW", "OIHW", "NCHW")},        # the NCHW form is not rewritten
    {"dtype": "float16"}, {"dtype": "int8"},
    {"out": [1, 8, 8, 8], "in_channels": 8},      # a test model's convolution: the transforms would cost more
])
def test_what_does_not_fit_winograd(change):
    assert not levers.winograd_fits(_conv(**change))


def test_the_size_threshold_is_in_multiply_adds():
    side = 16                                     # 16x16 outputs x 3x3 x C x C: find C at the threshold
    c = next(c for c in range(8, 1024, 8) if side * side * c * c * 9 >= levers.WINOGRAD_MIN_MACS)
    assert levers.winograd_fits(_conv(out=[1, side, side, c], in_channels=c))
    assert not levers.winograd_fits(_conv(out=[1, side, side, c - 8], in_channels=c - 8))
