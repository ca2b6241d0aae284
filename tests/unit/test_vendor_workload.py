"""Which vendor call (cuDNN conv2d / cuBLAS matmul) computes a TIR PrimFunc, read from its TVMScript
text without TVM (analysis/vendor_workload.py): hand-written workloads of fixtures/ and modules
printed by TVM 0.27 (fixtures/vendor/)."""
from __future__ import annotations

from pathlib import Path

from asight_lsp.analysis.vendor_workload import affine, describe, recognise

ROOT = Path(__file__).resolve().parents[2]


def read(name: str) -> dict:
    return recognise((ROOT / "fixtures" / name).read_text())


def test_the_resnet_conv_of_the_issue_is_nhwc_hwio_stride_1_pad_1():
    conv = read("vendor/conv2d_nhwc_resnet.py")            # printed: class Module, T.sblock_alloc_buffer
    assert (conv["op"], conv["layout"], conv["kernel_layout"]) == ("conv2d", "NHWC", "HWIO")
    assert conv["stride"] == [1, 1] and conv["dilation"] == [1, 1] and conv["padding"] == [1, 1, 1, 1]
    assert (conv["groups"], conv["data"], conv["weight"], conv["output"]) == (1, 0, 1, 2)
    assert conv["shapes"] == {"data": [1, 56, 56, 64], "weight": [3, 3, 64, 64], "output": [1, 56, 56, 64]}
    assert describe(conv) == "conv2d NHWC/HWIO, stride 1×1, padding 1,1,1,1"


def test_a_hand_written_conv_with_its_own_names_reads_the_same():
    conv = read("conv2d_nhwc.py")
    assert (conv["layout"], conv["kernel_layout"], conv["stride"], conv["padding"]) == ("NHWC", "HWIO", [1, 1], [1, 1, 1, 1])
    assert conv["shapes"]["weight"] == [3, 3, 16, 32]


def test_stride_2_pads_only_what_the_output_reads():
    conv = read("vendor/conv2d_nchw_s2.py")
    assert (conv["layout"], conv["kernel_layout"], conv["stride"]) == ("NCHW", "OIHW", [2, 2])
    # 56 + 1 leading: 28 outputs at stride 2 with a 3-wide kernel read up to row 56, so no trailing row
    assert conv["padding"] == [1, 0, 1, 0] and conv["shapes"]["output"] == [1, 128, 28, 28]


def test_dilation_and_depthwise_groups():
    dil = read("vendor/conv2d_nchw_dil2.py")
    assert dil["dilation"] == [2, 2] and dil["padding"] == [2, 2, 2, 2]
    assert describe(dil).endswith("dilation 2×2")
    dw = read("depthwise_conv2d.py")
    assert (dw["op"], dw["layout"], dw["kernel_layout"], dw["groups"]) == ("conv2d", "NCHW", "OIHW", 32)


def test_a_matmul_is_recognised_as_one():
    mm = read("gpu/matmul1024.py")                         # N = 1024 is a module constant
    assert mm == {"op": "matmul", "a": 0, "b": 1, "output": 2,
                  "shapes": {"A": [1024, 1024], "B": [1024, 1024], "C": [1024, 1024]}}


def test_what_no_single_vendor_call_computes_says_why_in_one_line():
    relu = read("vendor/conv2d_nchw_relu.py")
    assert relu["op"] is None and "does more than one operation" in relu["why"] and "'conv2d_nchw'" in relu["why"]
    assert read("matmul_bias_relu.py") == {"op": None, "why": "not a plain matmul of the function's parameters"}
    assert "3/3/3-D" in read("batch_matmul.py")["why"]
    assert read("softmax.py")["why"].startswith("no multiply-accumulate block")
    assert recognise("def f(:\n")["why"].startswith("the TVMScript does not parse")
    assert recognise("x = 1\n") == {"op": None, "why": "no PrimFunc with T.Buffer parameters"}


def test_affine_index_expressions():
    import ast
    expr = lambda text: affine(ast.parse(text, mode="eval").body)   # noqa: E731
    assert expr("v_yy * 2 + v_ry - 1") == {"v_yy": 2, "v_ry": 1, "": -1}
    assert expr("2 * (h + r)") == {"h": 2, "r": 2}
    assert expr("h * w") is None and expr("h // 2") is None
