"""Per-stage latency by rdtsc instrumentation (TVM side): ``llvm.readcyclecounter`` around every
top-level stage of a PrimFunc's root block, read back call by call (docs/profiling.md)."""
from __future__ import annotations

import numpy as np

from .compat import s_tir, stmt_children, tirx, tvm
from .host import tsc_hz
from .programs import entry_name

SOURCE_STAGES = "rdtsc (llvm.readcyclecounter) around each top-level stage of the root block"


def _span_lines(span) -> list[int] | None:
    return None if span is None else [int(span.line), int(span.end_line)]


_FOR_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}


def stage_blocks(stmt) -> dict:
    """Blocks (name, realize/store lines) and loop kinds inside one top-level stage."""
    blocks, kinds = [], set()

    def walk(node, current):
        if isinstance(node, s_tir.SBlockRealize):
            current = {"name": node.block.name_hint, "realize_lines": _span_lines(node.span), "store_lines": []}
            blocks.append(current)
        elif isinstance(node, tirx.For):
            kinds.add(_FOR_KINDS.get(int(node.kind), str(node.kind)))
        elif isinstance(node, tirx.BufferStore) and current is not None and node.span is not None:
            if int(node.span.line) not in current["store_lines"]:
                current["store_lines"].append(int(node.span.line))
        for child in stmt_children(node):
            walk(child, current)

    walk(stmt, None)
    return {"blocks": blocks, "loop_kinds": sorted(kinds)}


def instrument(func, capacity: int):
    """``func`` with rdtsc stores around every top-level stage of its root block.

    Returns the new PrimFunc, which takes an extra trailing int64 buffer ``asight_prof`` of
    ``1 + capacity * 2K`` slots, and the K stage descriptions.  Slot 0 counts the calls; call ``c``
    writes its ticks to row ``min(c, capacity - 1)``, so a whole ``time_evaluator`` round is
    recorded call by call (the same back-to-back calling pattern as the plain program's timing).
    """
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        raise ValueError("no root block: the function is not an s_tir PrimFunc")
    root = realize.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    timed = [i for i, s in enumerate(stmts) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    width = 2 * len(timed)
    prof = tirx.decl_buffer((1 + capacity * width,), "int64", name="asight_prof")
    i64 = lambda v: tirx.IntImm("int64", v)  # noqa: E731
    count = tirx.BufferLoad(prof, [i64(0)])

    def tick(slot):
        index = tirx.Min(count, i64(capacity - 1)) * i64(width) + i64(1 + slot)
        return tirx.BufferStore(prof, tirx.call_llvm_intrin("int64", "llvm.readcyclecounter"), [index])

    body, stages = [], []
    for i, stmt in enumerate(stmts):
        if i not in timed:
            body.append(stmt)
            continue
        k = len(stages)
        stages.append({"index": k, **stage_blocks(stmt)})
        body += [tick(2 * k), stmt, tick(2 * k + 1)]
    body.append(tirx.BufferStore(prof, count + i64(1), [i64(0)]))
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, tirx.SeqStmt(body),
                            root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    new_realize = s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root)
    return tirx.PrimFunc(list(func.params) + [prof], new_realize, func.ret_type, func.attrs), stages


def profile_stages(mod, target, arrays: list[np.ndarray], plain_rt, whole_hint_us: float | None,
                   budget_ms: float = 300.0) -> dict:
    """Per-stage latency (median over calls) of the PrimFunc ``mod["main"]``.

    The instrumented program runs under ``time_evaluator`` (single back-to-back calls), so each
    call yields both its stage ticks and its end-to-end time: ``ratio`` = Σ stage medians / median
    end-to-end time of the same calls says whether the stages account for the whole call.  The
    plain program (``plain_rt``) is timed in interleaved rounds (~1 ms apart, so both see the same
    load on this shared VM); ``intrusion`` = instrumented / plain, as the median of per-round ratios.
    Different binaries of one kernel can differ by ±15 % here (observed 88 vs 105 µs, either way
    round), so ``intrusion`` is reported, not folded into the stage times.
    """
    hint = max(whole_hint_us or 1000.0, 1.0)
    per_round = int(np.clip(2e3 / hint, 3, 50))                        # ~2 ms per round and program
    rounds = int(np.clip(budget_ms * 1e3 / (2 * per_round * hint), 20, 200))
    capacity = per_round + 4  # time_evaluator adds a warm-up call
    from .parse import checked_for_build
    new_func, stages = instrument(checked_for_build(mod, target, "the kernel")["main"], capacity)
    entry = entry_name(mod)
    rt = tvm.tirx.build(tvm.IRModule({"main": new_func}), target=target)
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    width = 2 * len(stages)
    zeros = np.zeros(1 + capacity * width, "int64")
    prof = tvm.runtime.tensor(zeros, dev)
    hz = tsc_hz()
    plain = plain_rt.time_evaluator(entry, dev, number=1, repeat=per_round)
    timed = rt.time_evaluator(entry, dev, number=1, repeat=per_round)
    ticks, plains, ends, paired = [], [], [], []
    for _ in range(rounds):
        round_plain = [x * 1e6 for x in plain(*args).results]
        prof.copyfrom(zeros)
        round_ends = [x * 1e6 for x in timed(*args, prof).results]
        data = prof.numpy()
        calls = min(int(data[0]), capacity)
        ticks.extend(data[1:1 + calls * width].reshape(calls, width)[1:])  # drop the warm-up call
        paired.append(float(np.median(round_ends)) / float(np.median(round_plain)))
        plains.extend(round_plain)
        ends.extend(round_ends)
    result = stage_stats(np.asarray(ticks, dtype=np.int64), stages, hz)
    whole_us = float(np.median(ends))
    result.update(whole_us=whole_us, ratio=result["sum_us"] / whole_us, plain_us=float(np.median(plains)),
                  intrusion=float(np.median(paired)), rounds=rounds,
                  whole_source="end-to-end time (time_evaluator) of the same instrumented calls",
                  intrusion_source="instrumented / plain program, median of per-round ratios (interleaved rounds)")
    return result


def stage_stats(ticks: np.ndarray, stages: list[dict], hz: float) -> dict:
    """Per-stage medians (µs) from rows of [start0, end0, start1, end1, ...] rdtsc ticks."""
    per_stage = (ticks[:, 1::2] - ticks[:, 0::2]) / hz * 1e6
    whole = (ticks[:, -1] - ticks[:, 0]) / hz * 1e6 if stages else np.zeros(len(ticks))
    for stage, column in zip(stages, per_stage.T):
        p25, p75 = np.percentile(column, [25, 75])
        stage.update({"us": float(np.median(column)), "p25_us": float(p25), "p75_us": float(p75)})
    return {"stages": stages, "sum_us": sum(s["us"] for s in stages), "calls": int(len(ticks)),
            "instrumented_whole_us": float(np.median(whole)), "tsc_hz": hz, "source": SOURCE_STAGES}
