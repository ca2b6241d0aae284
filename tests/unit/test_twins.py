"""Twins and siblings among a model's tasks (analysis/twins.py, pure): the rule and the summary."""
from asight_lsp.analysis import twins


def conv(cin, cout, size, dtype="float32"):
    return {"op": "conv2d_nchw",
            "iters": [["S", 1], ["S", cout], ["S", size], ["S", size], ["R", cin], ["R", 3], ["R", 3]],
            "reads": [[[1, cin, size + 2, size + 2], dtype], [[cout, cin, 3, 3], dtype]],
            "writes": [[[1, cout, size, size], dtype]]}


SIGS = {
    "fused_conv2d3_add3_relu2": conv(256, 256, 14),
    "fused_conv2d3_add3_add4_relu2": conv(256, 256, 14),      # same convolution, residual add fused
    "fused_conv2d6_add6_relu5": conv(512, 512, 7),
    "fused_conv2d1_add1_relu1": conv(64, 64, 56),
    "fused_conv2d9_add9_relu9": conv(128, 128, 28),
    "fused_conv2d_f16": conv(256, 256, 14, "float16"),        # another dtype: not a twin
    "fused_matmul_add": {"op": "matmul", "iters": [["S", 1], ["S", 1000], ["R", 512]],
                         "reads": [[[1, 512], "float32"], [[512, 1000], "float32"]], "writes": [[[1, 1000], "float32"]]},
    "reshape": None,
}


def test_twins_are_the_same_computation_with_other_epilogues():
    rel = twins.relate(SIGS)
    assert rel["fused_conv2d3_add3_relu2"]["twins"] == ["fused_conv2d3_add3_add4_relu2"]
    assert rel["fused_conv2d3_add3_add4_relu2"]["twins"] == ["fused_conv2d3_add3_relu2"]
    assert rel["fused_conv2d_f16"]["twins"] == []                    # dtype differs
    assert rel["fused_matmul_add"] == {"op": "matmul", "twins": [], "siblings": []}
    assert "reshape" not in rel                                      # no reduction: no relation
    assert twins.groups(rel) == [["fused_conv2d3_add3_relu2", "fused_conv2d3_add3_add4_relu2"]]


def test_siblings_are_the_nearest_shapes_of_the_same_operator():
    rel = twins.relate(SIGS, max_siblings=2)
    # 256x14x14: the fp16 one has its extents (distance 0); 512x7x7 and 128x28x28 are one
    # halving/doubling of each extent away (a tie: task order); 64x56x56 is two
    near = rel["fused_conv2d3_add3_relu2"]["siblings"]
    assert near == ["fused_conv2d_f16", "fused_conv2d6_add6_relu5"]
    assert twins.distance(SIGS["fused_conv2d3_add3_relu2"], SIGS["fused_conv2d9_add9_relu9"]) == \
        twins.distance(SIGS["fused_conv2d3_add3_relu2"], SIGS["fused_conv2d6_add6_relu5"])
    assert twins.donors("fused_conv2d3_add3_relu2", rel)[0] == ("fused_conv2d3_add3_add4_relu2", "twin")
    assert [r for _, r in twins.donors("fused_conv2d3_add3_relu2", rel)] == ["twin", "sibling", "sibling"]
    assert twins.same_operator(conv(3, 64, 112), conv(64, 64, 56))
    assert not twins.same_operator(conv(3, 64, 112), SIGS["fused_matmul_add"]) and not twins.same_operator(None, None)


def test_summary_says_what_each_transfer_gave():
    rel = twins.relate(SIGS)
    transfers = [
        {"task": "fused_conv2d3_add3_relu2", "donor": "fused_conv2d3_add3_add4_relu2", "relation": "twin",
         "latency_us": 550.0, "own_best_us": 2160.0, "resampled": 0},
        {"task": "fused_conv2d3_add3_relu2", "donor": "fused_conv2d9_add9_relu9", "relation": "sibling",
         "latency_us": None, "own_best_us": 2160.0, "resampled": 3},
        {"task": "fused_conv2d6_add6_relu5", "donor": "fused_conv2d3_add3_relu2", "relation": "sibling",
         "latency_us": 900.0, "own_best_us": 800.0, "resampled": 2},
        {"task": "fused_conv2d9_add9_relu9", "donor": "fused_conv2d3_add3_relu2", "relation": "sibling",
         "latency_us": 700.0, "own_best_us": None, "resampled": 1}]
    out = twins.summary(rel, transfers)
    first = out["fused_conv2d3_add3_relu2"]
    assert first["bestGain"] == 2160.0 / 550.0 and first["adopted"] == 1
    assert first["transfers"][1]["gain"] is None and not first["transfers"][1]["adopted"]
    assert out["fused_conv2d6_add6_relu5"]["adopted"] == 0 and out["fused_conv2d6_add6_relu5"]["bestGain"] < 1
    assert out["fused_conv2d9_add9_relu9"]["adopted"] == 0            # the task had nothing yet: it starts there
    line = twins.describe("fused_conv2d3_add3_relu2", first)
    assert "twin of fused_conv2d3_add3_add4_relu2" in line and "(3.93x)" in line and "1 adopted" in line
    assert "started from fused_conv2d3_add3_relu2" in twins.describe("fused_conv2d9_add9_relu9",
                                                                      out["fused_conv2d9_add9_relu9"])
    assert twins.describe("fused_matmul_add", out["fused_matmul_add"]) is None
    assert "no transfer measured" in twins.describe("fused_conv2d_f16", out["fused_conv2d_f16"])
