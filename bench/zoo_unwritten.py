"""Networks the corpus does not hold (fixtures/models/zoo.py), each written in code the way an old or
new exporter writes it, through `asight import`'s worker steps (import, output check against
onnxruntime): how many fail, and whether each failure is one clear line or an internal error.

    python bench/zoo_unwritten.py [--out bench/results/zoo-unwritten.json]

An *internal error* is any failure that is not the import's own one-line refusal (a ValueError from
`worker/onnx_prepare.py` or `worker/model_import.py`): a bare TVM exception, an AssertionError, a crash.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
sys.path.insert(0, str(ROOT))
import zoo  # noqa: E402

F = TensorProto.FLOAT


def _net(style: str, name: str, shape: list, body, opset: int | None = None) -> object:
    g = zoo.Graph(style, 0)
    x = g.input("input", F, shape)
    y, out_shape = body(g, x)
    return g.model(name, [(y, out_shape)], opset)


def alexnet_lrn(style):
    """AlexNet/ZFNet-style: 11x11 stride 4 conv, LRN, overlapping 3x3/2 max pools, Dropout, Flatten+Gemm heads."""
    def body(g, x):
        y = g.op("LRN", [g.op("Relu", [g.op("Conv", [x, g.random("w", (8, 3, 11, 11), 0.05)], kernel_shape=[11, 11],
                                             strides=[4, 4], pads=[2, 2, 2, 2])])], size=5, alpha=1e-4, beta=0.75, bias=1.0)
        y = g.pool("MaxPool", y, 3, 2)
        y = g.op("LRN", [g.op("Relu", [g.conv(y, 8, 16, 5)])], size=5, alpha=1e-4, beta=0.75, bias=2.0)
        y = g.op("Flatten", [g.pool("MaxPool", y, 3, 2)], axis=1)
        y = g.dropout(y, 0.5)
        w, b = g.random("fc_w", (10, 16 * 3 * 3), 0.1), g.random("fc_b", (10,), 0.01)
        return g.op("Gemm", [y, w, b], transB=1), [1, 10]
    return _net(style, "alexnet_lrn", [1, 3, 67, 67], body)


def googlenet_stem(style):
    """GoogLeNet's stem: conv 7x7/2, MaxPool 3x3/2 with ceil_mode (opset 10+; floor in opset 9), LRN."""
    def body(g, x):
        y = g.op("Relu", [g.conv(x, 3, 8, 7, 2)])
        ceil = {} if g.old else {"ceil_mode": 1}
        y = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], **ceil)
        y = g.op("LRN", [y], size=5, alpha=1e-4, beta=0.75)
        return y, [1, 8, 8 if g.old else 9, 8 if g.old else 9]
    return _net(style, "googlenet_stem", [1, 3, 36, 36], body)


def upsample_decoder(style):
    """A segmentation decoder: opset 9 Upsample (scales input, nearest) or Resize (opset 11+), then Conv."""
    def body(g, x):
        scales = g.const(np.array([1, 1, 2, 2], "float32"))
        if g.old:
            y = g.op("Upsample", [x, scales], mode="nearest")
        else:
            y = g.op("Resize", [x, "", scales], mode="nearest")
        return g.conv(y, 4, 4, 3), [1, 4, 16, 16]
    return _net(style, "upsample_decoder", [1, 4, 8, 8], body)


def bn_spatial(style):
    """BatchNormalization with ``spatial=1`` and Dropout with a ratio as opset 7 wrote them (old;
    the attribute is gone at 9), or opset 17's plain BatchNormalization (new)."""
    g = zoo.Graph("new", 0)      # plain initializers: ConstantOfShape does not exist in opset 7
    x = g.input("input", F, [1, 4, 6, 6])
    args = [g.random(n, (4,), 0.1) for n in ("s", "b", "m")] + [g.weight("var", np.ones(4, "float32"))]
    y = g.op("BatchNormalization", [x, *args], epsilon=1e-5, **({"spatial": 1} if style == "old" else {}))
    y = g.op("Dropout", [y], ratio=0.3) if style == "old" else y
    if style == "new":
        return g.model("bn_spatial", [(y, [1, 4, 6, 6])])
    graph = helper.make_graph(g.nodes, "bn_spatial", g.inputs, [helper.make_tensor_value_info(y, F, [1, 4, 6, 6])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)])
    model.ir_version = 3
    return model


def sum_concat_softmax(style):
    """Sum of three inputs, Concat of eight, Softmax (opset 9: the 2-D coercion at axis 1), Pad (opset 9: pads attribute)."""
    def body(g, x):
        a, b, c = (g.conv(x, 4, 4, 1) for _ in range(3))
        s = g.op("Sum", [a, b, c])
        cat = g.op("Concat", [s] * 8, axis=1)
        if g.old:
            pad = g.op("Pad", [cat], pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="constant", value=0.0)
        else:
            pad = g.op("Pad", [cat, g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], "int64"))], mode="constant")
        flat = g.op("Flatten", [pad], axis=1)
        return g.op("Softmax", [flat], axis=1), [1, 32 * 8 * 8]
    return _net(style, "sum_concat_softmax", [1, 4, 6, 6], body)


def softmax_4d(style):
    """Softmax over axis 1 of a 4-D tensor: opset 9-12 flatten from that axis (coerced 2-D), 13+ one axis."""
    return _net(style, "softmax_4d", [1, 3, 4, 4], lambda g, x: (g.op("Softmax", [x], axis=1), [1, 3, 4, 4]))


def slice_squeeze(style):
    """Slice (opset 9: starts/ends attributes), Squeeze (axes attribute before 13), ReduceSum keepdims."""
    def body(g, x):
        if g.old:
            y = g.op("Slice", [x], starts=[1], ends=[3], axes=[1])
            y = g.op("Squeeze", [g.op("ReduceSum", [y], axes=[1], keepdims=1)], axes=[1])
        else:
            y = g.op("Slice", [x, *(g.const(np.array(v, "int64")) for v in ([1], [3], [1]))])
            y = g.op("Squeeze", [g.op("ReduceSum", [y, g.const(np.array([1], "int64"))], keepdims=1),
                                 g.const(np.array([1], "int64"))])
        return y, [1, 5, 5]
    return _net(style, "slice_squeeze", [1, 4, 5, 5], body)


def activations(style):
    """Elu, Selu, LeakyRelu, HardSigmoid, Softplus, PRelu (per-channel slope (C,1,1)), Tanh, Sigmoid in a row."""
    def body(g, x):
        y = g.op("Elu", [x], alpha=1.0)
        y = g.op("Selu", [y])
        y = g.op("LeakyRelu", [y], alpha=0.1)
        y = g.op("HardSigmoid", [y])
        y = g.op("Softplus", [y])
        y = g.op("PRelu", [g.op("Sub", [y, g.scalar(1.0)]), g.weight("slope", np.full((4, 1, 1), 0.2, "float32"))])
        return g.op("Sigmoid", [g.op("Tanh", [y])]), [1, 4, 5, 5]
    return _net(style, "activations", [1, 4, 5, 5], body)


def prelu_rank1(style):
    """PReLU with a rank-1 slope of C values on NCHW (per channel, as pre-opset-7 models and some converters write it)."""
    def body(g, x):
        return g.op("PRelu", [x, g.weight("slope", np.linspace(0.1, 0.4, 4).astype("float32"))]), [1, 4, 5, 6]
    return _net(style, "prelu_rank1", [1, 4, 5, 6], body)


def conv_transpose_unet(style):
    """A U-Net step: ConvTranspose 2x2 stride 2, Concat with the skip, Conv, InstanceNormalization."""
    def body(g, x):
        down = g.pool("MaxPool", g.conv(x, 4, 8, 3), 2, 2)
        up = g.op("ConvTranspose", [down, g.random("wt", (8, 4, 2, 2), 0.2)], kernel_shape=[2, 2], strides=[2, 2])
        y = g.conv(g.op("Concat", [up, x], axis=1), 8, 4, 3)
        y = g.op("InstanceNormalization", [y, g.weight("in_s", np.ones(4, "float32")), g.random("in_b", (4,), 0.1)])
        return y, [1, 4, 8, 8]
    return _net(style, "conv_transpose_unet", [1, 4, 8, 8], body)


def mean_max_tile(style):
    """Max and Mean of several inputs, Tile (repeats input), Expand, ArgMax head (int64 output cast)."""
    def body(g, x):
        a, b = g.conv(x, 4, 4, 1), g.conv(x, 4, 4, 3)
        m = g.op("Max", [a, b, x])
        mean = g.op("Mean", [a, b, m])
        tiled = g.op("Tile", [mean, g.const(np.array([1, 2, 1, 1], "int64"))])
        return g.op("ReduceMax", [tiled], axes=[2, 3], keepdims=0), [1, 8]
    return _net(style, "mean_max_tile", [1, 4, 6, 6], body)


def keras_style(style):
    """As keras2onnx/tf2onnx write a CNN: Conv with ``auto_pad=SAME_UPPER``, AveragePool counting pads,
    GlobalMaxPool, Gemm with alpha, beta and a transposed input, Clip with only a lower bound."""
    def body(g, x):
        y = g.op("Conv", [x, g.random("w", (6, 3, 3, 3), 0.2)], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
        y = g.op("AveragePool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
        y = g.op("Clip", [y], min=0.0) if g.old else g.op("Clip", [y, g.scalar(0.0)])
        flat = g.op("Transpose", [g.op("Flatten", [g.op("GlobalMaxPool", [y])], axis=1)], perm=[1, 0])
        gemm = g.op("Gemm", [flat, g.random("fc", (6, 5), 0.3), g.random("bias", (1, 5), 0.1)], alpha=0.5, beta=2.0, transA=1)
        return gemm, [1, 5]
    return _net(style, "keras_style", [1, 3, 9, 9], body)


def opset18_transformer_bits(style):
    """Opset 18's forms (new) or opset 9's (old): ReduceMean axes as an input, Split by num_outputs,
    Einsum for the scores (old: Transpose and MatMul), Softmax."""
    def body(g, x):
        if g.old:
            mean = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
            a, b = g.op("Split", [g.op("Sub", [x, mean])], outputs=2, axis=1, split=[2, 2])
        else:
            mean = g.op("ReduceMean", [x, g.const(np.array([-1], "int64"))], keepdims=1)
            a, b = g.op("Split", [g.op("Sub", [x, mean])], outputs=2, axis=1, num_outputs=2)
        scores = g.op("MatMul", [a, g.op("Transpose", [b], perm=[0, 1, 3, 2])]) if g.old else \
            g.op("Einsum", [a, b], equation="bhij,bhkj->bhik")
        return g.op("Softmax", [scores], axis=-1), [1, 2, 4, 4]
    return _net(style, "opset18_bits", [1, 4, 4, 8], body, 18 if style == "new" else None)


def pixel_shuffle(style):
    """A super-resolution tail: Conv to 4C channels, DepthToSpace (CRD), Sigmoid; Constant value_float
    (opset 12+) for a scale where the new style has it."""
    def body(g, x):
        y = g.op("DepthToSpace", [g.conv(x, 3, 12, 3)], blocksize=2, **({} if g.old else {"mode": "CRD"}))
        scale = g.scalar(0.5) if g.old else g.op("Constant", [], value_float=0.5)
        return g.op("Sigmoid", [g.op("Mul", [y, scale])]), [1, 3, 8, 8]
    return _net(style, "pixel_shuffle", [1, 3, 4, 4], body)


def lstm_tagger(style):
    """A sequence tagger with an LSTM (TVM 0.27's importer has no converter: one line)."""
    g = zoo.Graph(style, 0)
    x = g.input("input", F, [5, 1, 4])
    w, r = g.random("W", (1, 16, 4), 0.2), g.random("R", (1, 16, 4), 0.2)
    y, _, _ = g.op("LSTM", [x, w, r], outputs=3, hidden_size=4)
    return g.model("lstm_tagger", [(y, [5, 1, 1, 4])])


NETWORKS = [alexnet_lrn, googlenet_stem, upsample_decoder, bn_spatial, sum_concat_softmax, softmax_4d, slice_squeeze,
            activations, prelu_rank1, conv_transpose_unet, mean_max_tile,
            keras_style, opset18_transformer_bits, pixel_shuffle, lstm_tagger]


def try_one(base: Path, build, style: str) -> dict:
    from zoo_check import import_and_check

    from asight_lsp.views.outputs import verdict
    row = {"network": build.__name__, "style": style}
    model = base / f"{build.__name__}_{style}.onnx"
    try:
        zoo.save(build(style), model)
    except Exception as err:  # noqa: BLE001
        return {**row, "result": "not built", "line": f"{type(err).__name__}: {err}".splitlines()[0]}
    started = time.perf_counter()
    try:
        _, checked = import_and_check(model, base / f"{model.stem}_relax.py")
    except ValueError as err:       # the import's own refusal (worker/onnx_prepare.py, model_import.py)
        return {**row, "result": "refused (one line)", "line": str(err)}
    except Exception as err:  # noqa: BLE001
        return {**row, "result": "INTERNAL ERROR", "line": f"{type(err).__name__}: {err}".splitlines()[0]}
    ok, line = verdict(checked)
    return {**row, "result": "imported, outputs match" if ok and "check" in checked else
            ("imported, not compared" if ok else "imported, OUTPUTS DIFFER"), "line": line,
            "seconds": round(time.perf_counter() - started, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "zoo-unwritten.json"))
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for build in NETWORKS:
            for style in zoo.STYLES:
                rows.append(try_one(Path(tmp), build, style))
                print(f"{rows[-1]['network']:<22} {style:<4} {rows[-1]['result']:<28} {rows[-1]['line'][:200]}", flush=True)
    internal = sum(r["result"].startswith("INTERNAL") for r in rows)
    print(f"internal errors: {internal} of {len(rows)}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "internal_errors": internal}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
