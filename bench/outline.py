"""Outline (TVM-free) and check (warm worker) time on a generated 3,000-line TVMScript file.

Goals (issue 2): outline <= 20 ms, warm check <= 300 ms (medians of 20).  Outline is timed the same way (one
function edited per run; chunks that did not change come from the chunk cache).  "Warm check" is what the
editor does on every debounced edit: the worker is running and one function changed since the last
check (unchanged units come from the worker's parse cache).  A cold full check (every unit parsed,
nothing cached) is printed for reference.

    python bench/outline.py [--repeats 20] [--json bench/results/outline.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from asight_lsp.tvmscript.diagnostics import check_text  # noqa: E402
from asight_lsp.tvmscript.outline import build_outline  # noqa: E402
from asight_lsp.engine.client import WorkerClient  # noqa: E402

FUNC = '''

@T.prim_func(s_tir=True)
def kernel_{i}(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
               bias: T.Buffer((64,), "float32"), D: T.Buffer((64, 64), "float32")):
    T.func_attr({{"global_symbol": "kernel_{i}", "tir.noalias": True}})
    C = T.alloc_buffer((64, 64), "float32")
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(64, 64):
        with T.sblock("bias_relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj] + bias[vj], T.float32({i}))
'''


def generate(lines: int = 3000) -> str:
    head = "from tvm.script import tirx as T\n"
    body, i = [], 0
    while (len(head.splitlines()) + sum(b.count("\n") for b in body)) < lines:
        body.append(FUNC.format(i=i))
        i += 1
    return head + "".join(body)


def edit(text: str, n: int, n_funcs: int) -> str:
    """The text with one constant of one function changed, as a keystroke would."""
    return text.replace(f"T.float32({n % n_funcs}))", f"T.float32({n % n_funcs}.5))", 1)


def median_ms(fn, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", default="bench/results/outline.json")
    args = parser.parse_args()
    text = generate()
    n_lines, n_funcs = len(text.splitlines()), text.count("@T.prim_func")
    start = time.perf_counter()
    build_outline(text)
    outline_cold_ms = (time.perf_counter() - start) * 1e3
    outline_edits = iter(range(10_000))
    outline_ms, _ = median_ms(lambda: build_outline(edit(text, next(outline_edits), n_funcs)), args.repeats)
    with WorkerClient() as worker:
        start = time.perf_counter()
        first = check_text(text, "gen.py", worker)
        cold_ms = (time.perf_counter() - start) * 1e3
        assert not first.diagnostics, first.diagnostics[:2]
        edits = iter(range(10_000))

        def edited_check():
            # change one constant in one function, as a keystroke would
            check_text(edit(text, next(edits), n_funcs), "gen.py", worker)

        warm_ms, _ = median_ms(edited_check, args.repeats)
        same_ms, _ = median_ms(lambda: check_text(text, "gen.py", worker), args.repeats)
    figures = {"lines": n_lines, "functions": n_funcs, "outline_one_function_edited_ms_median": round(outline_ms, 2),
               "outline_cold_ms": round(outline_cold_ms, 1),
               "check_warm_one_function_edited_ms_median": round(warm_ms, 1),
               "check_warm_unchanged_ms_median": round(same_ms, 1),
               "check_cold_all_units_ms": round(cold_ms, 1),
               "goals": {"outline_ms": 20, "check_warm_ms": 300}}
    print(json.dumps(figures, indent=2))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
