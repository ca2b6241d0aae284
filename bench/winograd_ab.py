"""A/B of the Winograd lever (issue 21) on one 3x3 convolution of stride 1 (bias and ReLU fused, weights
bound as constants, as in a deployable model): the fused kernel as the pipeline builds it with the lever
off (the direct channels-last convolution) and on (``worker/winograd.py``), each tuned with the same
trials and seed, then the two bests timed in interleaved rounds (``nhwc_ab.time_ab``: weights already
packed; the ratio is the median of per-round ratios with a bootstrap 95 % CI).

    python bench/winograd_ab.py SIZE CHANNELS [TRIALS]     (ResNet-18: 56 64, 28 128, 14 256, 7 512)

The bench needs the machine to itself: a Winograd kernel runs three parallel phases a call, and timed
beside a test run it lost far more than the direct kernel did (docs/models.md).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TVM_NUM_THREADS", "2")
import nhwc_ab  # noqa: E402  (sets up TVM and the product's path)
from asight_lsp.worker.compat import relax  # noqa: E402
from asight_lsp.worker.metaschedule import resolve_target, stub_tensor_intrin  # noqa: E402


def conv_model(size: int, channels: int):
    """``relu(conv2d(x, W, padding 1) + b)`` in NCHW on bound weights (seed 0), as the importer gives it."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype("float32")
    b = rng.standard_normal((1, channels, 1, 1)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, channels, size, size), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=1), name_hint="conv")
            r = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(c, relax.const(b)), name_hint="add")), name_hint="relu")
            out = bb.emit_output(r)
        bb.emit_func_output(out)
    return bb.get()


def main() -> int:
    size, channels = int(sys.argv[1]), int(sys.argv[2])
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    target = resolve_target(None)
    stub_tensor_intrin()
    mod = conv_model(size, channels)
    sides = {"direct": nhwc_ab.fused_with(mod, target, "winograd"), "winograd": nhwc_ab.fused_with(mod, target, "")}
    best = {}
    for label, fused in sides.items():
        task = next(gv.name_hint for gv in fused.get_global_vars() if "conv2d" in gv.name_hint)
        started = time.time()
        best[label] = nhwc_ab.best_of(fused[task], target, f"{label}_{size}_{channels}", trials, prefix="winograd_ab")
        print(f"{label}: {task} tuned in {time.time() - started:.0f} s", flush=True)
    print(f"{size}x{size}x{channels} at {trials} trials: " + nhwc_ab.time_ab(best, target, "winograd", "direct"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
