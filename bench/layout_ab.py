"""A/B of the layout lever (issue 21) on one task of an imported model: the same fused kernel tuned with
and without ``layout_free_buffers`` (same trials, same seed, back to back), then the two bests timed
in interleaved rounds (weights already packed, as the builder and the library run them); the ratio is
the median of per-round ratios with a bootstrap 95 % CI (``nhwc_ab.time_ab``).

    python bench/layout_ab.py MODEL_relax.py TASK [TRIALS]     (the weights file beside MODEL_relax.py)

e.g. after ``asight import resnet18.onnx`` (bench/model_levers.py --scale full writes one).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nhwc_ab import best_of, load, rp, resolve_target, stub_tensor_intrin, time_ab  # noqa: E402


def main() -> int:
    model, task = sys.argv[1], sys.argv[2]
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    target = resolve_target(None)
    stub_tensor_intrin()
    fused = rp.fuse(load(model), target, off=frozenset())    # every lever on: marked
    sides = {"layout": fused[task], "plain": fused[task].without_attr("layout_free_buffers")}
    best = {}
    for label, func in sides.items():
        started = time.time()
        best[label] = best_of(func, target, f"layout_{label}_{task}", trials)
        print(label, "tuned in", round(time.time() - started), "s", flush=True)
    print(f"{task} at {trials} trials: " + time_ab(best, target, "layout", "plain"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
