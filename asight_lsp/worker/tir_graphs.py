"""Dataflow graphs of TIR programs as plain data, for matching hotspots to source.

The worker only *describes* programs here; the matching itself is TVM-free
(``asight_lsp.analysis.matching``).  ``block_graph``: a PrimFunc as parsed (the source) and,
optionally, the same function with one or more MetaSchedule traces applied (the transformed
programs).  Nodes are blocks (plus the input buffers as ``param`` nodes), edges go producer ->
consumer through buffers.  (Relax: ``relax_graphs.py``.)

Every node carries the labels the matcher compares (iterator kinds, op mix, written buffer shape and
dtype, op pattern) and the supporting evidence it may use (names, TVMScript lines from spans).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ..engine import wire
from .compat import Trace, normalize_mod, s_tir, stmt_children, tirx, tvm, tvm_ffi
from ..store.runs import read_json_lines
from .parse import parse_request
from .records import FAILED_SECONDS, fresh_copy, workload_forms

ITER_KINDS = {0: "S", 1: "T", 2: "R", 3: "C", 4: "O"}
# tirx expression classes -> op label (index arithmetic inside loads is never visited)
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "FloorDiv": "floordiv",
           "FloorMod": "floormod", "Mod": "mod", "Min": "min", "Max": "max"}
_CALL_ALIASES = {"if_then_else": "select"}
_DIGITS = re.compile(r"\d+$")


# --------------------------------------------------------------------------- TIR


def expr_ops(expr) -> tuple[Counter, int]:
    """Arithmetic ops and buffer loads of a stored value: ``C + A*B`` -> ({add: 1, mul: 1}, 3).

    Loads are operands (their index arithmetic is not part of the computation); the condition of a
    select / ``if_then_else`` is index logic too and is skipped.
    """
    ops: Counter = Counter()
    loads = 0

    def visit(e):
        nonlocal loads
        name = type(e).__name__
        if name in ("BufferLoad", "TensorLoad"):
            loads += 1
        elif name in _BINARY:
            ops[_BINARY[name]] += 1
            visit(e.a)
            visit(e.b)
        elif name == "Select":
            ops["select"] += 1
            visit(e.true_value)
            visit(e.false_value)
        elif name == "Cast":
            ops["cast"] += 1
            visit(e.value)
        elif name == "Call":
            op = str(getattr(e.op, "name", e.op)).split(".")[-1]
            op = _CALL_ALIASES.get(op, op)
            ops[op] += 1
            for a in list(e.args)[1:] if op == "select" else list(e.args):
                visit(a)
        elif name in ("Broadcast", "Let"):
            visit(e.value)
            if name == "Let":
                visit(e.body)
    visit(expr)
    return ops, loads


def _stores(stmt) -> list:
    """BufferStores of a block body that belong to this block (not to nested blocks)."""
    out = []

    def walk(node):
        if isinstance(node, tirx.BufferStore):
            out.append(node)
        if isinstance(node, s_tir.SBlockRealize):
            return
        for child in stmt_children(node):
            walk(child)
    walk(stmt)
    return out


def _int(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return str(x)


def _buffer(buf) -> dict:
    return {"name": str(buf.name), "shape": [_int(s) for s in buf.shape], "dtype": str(buf.dtype),
            "scope": str(buf.scope())}


def _realizes(func) -> list[tuple[int, object]]:
    """(top-level stage index, SBlockRealize) for every block under the root block, in order."""
    root = func.body
    if not isinstance(root, s_tir.SBlockRealize):
        return []
    body = root.block.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    out, stage = [], 0
    for stmt in stmts:
        if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
            continue
        found = []

        def walk(node):
            if isinstance(node, s_tir.SBlockRealize):
                found.append(node)
            for child in stmt_children(node):
                walk(child)
        walk(stmt)
        out += [(stage, r) for r in found]
        stage += 1
    return out


def block_node(realize, stage: int, uid: str) -> dict:
    """Labels and evidence of one block."""
    block = realize.block
    stores = _stores(block.body)
    value = stores[-1].value if stores else None
    ops, loads = expr_ops(value) if value is not None else (Counter(), 0)
    extents = [_int(iv.dom.extent) for iv in block.iter_vars]
    iterations = 1
    for e in extents:
        iterations = iterations * e if isinstance(e, int) and iterations is not None else None
    writes = [_buffer(w.source) for w in block.writes]
    reads = []
    for r in block.reads:
        name = str(r.source.name)
        if name not in reads and name not in [w["name"] for w in writes]:
            reads.append(name)
    if not writes and stores:
        writes = [_buffer(stores[-1].buffer)]
    store_lines = sorted({int(s.span.line) for s in stores if s.span is not None})
    init_lines = sorted({int(s.span.line) for s in _stores(block.init) if s.span is not None}) if block.init else []
    return {
        "id": uid, "kind": "block", "name": str(block.name_hint), "stage": stage,
        "iter_kinds": "".join(ITER_KINDS.get(int(iv.iter_type), "?") for iv in block.iter_vars),
        "extents": extents, "ops": dict(sorted(ops.items())), "op_mix": "+".join(sorted(ops)) or
        ("copy" if loads == 1 else "const" if loads == 0 else "load"),
        "loads": loads, "writes": writes, "reads": reads, "init": block.init is not None,
        "flops": iterations * sum(ops.values()) if isinstance(iterations, int) else None,
        "store_lines": store_lines, "init_lines": init_lines,
        "realize_lines": None if realize.span is None else [int(realize.span.line), int(realize.span.end_line)],
    }


def tir_graph(func) -> dict:
    """Blocks and input buffers of a PrimFunc as a dataflow graph (plain data)."""
    nodes, seen, writers = [], Counter(), {}
    for stage, realize in _realizes(func):
        name = str(realize.block.name_hint)
        seen[name] += 1
        node = block_node(realize, stage, name if seen[name] == 1 else f"{name}#{seen[name]}")
        nodes.append(node)
        for w in node["writes"]:
            writers.setdefault(w["name"], []).append(node["id"])
    params = {str(p.name): p for p in func.params if hasattr(p, "shape")}
    buffers = {name: {**_buffer(p), "kind": "param"} for name, p in params.items()}
    for node in nodes:
        for w in node["writes"]:
            buffers.setdefault(w["name"], {**w, "kind": "alloc"})
    inputs, edges = {}, []
    for node in list(nodes):
        for buf in node["reads"]:
            if buf in writers:
                edges += [{"src": src, "dst": node["id"], "buffer": buf} for src in writers[buf] if src != node["id"]]
                continue
            if buf not in inputs:
                spec = buffers.get(buf) or {"name": buf, "shape": [], "dtype": "", "scope": "global", "kind": "param"}
                inputs[buf] = {"id": f"param:{buf}", "kind": "param", "name": buf, "shape": spec["shape"],
                               "dtype": spec["dtype"]}
            edges.append({"src": f"param:{buf}", "dst": node["id"], "buffer": buf})
    outputs = [name for name in params if name in writers]
    return {"kind": "tir", "nodes": list(inputs.values()) + nodes, "edges": edges, "buffers": buffers,
            "outputs": outputs, "stages": 1 + max((n["stage"] for n in nodes), default=-1)}


def _prim_func(parsed, function: str | None):
    if isinstance(parsed, tirx.PrimFunc):
        return function or "main", parsed
    names = [gv.name_hint for gv in parsed.get_global_vars() if isinstance(parsed[gv], tirx.PrimFunc)]
    if function and function not in names:
        raise ValueError(f"no PrimFunc '{function}' in the module (has: {', '.join(sorted(names)) or 'none'})")
    if not function:
        if len(names) != 1 and "main" not in names:
            raise ValueError(f"the module has {len(names)} PrimFuncs; name one ({', '.join(sorted(names))})")
        function = names[0] if len(names) == 1 else "main"
    return function, parsed[function]


def apply_trace(func, trace_json):
    """``func`` (normalised as MetaSchedule tunes it) with a JSON trace replayed, postprocs included."""
    sch = s_tir.Schedule(normalize_mod(fresh_copy(func)))
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


def run_records(run_dir: str, func) -> tuple[list[dict], str]:
    """Valid records of ``func`` in a run's JSON database (trial order) and how the workload matched.

    The workload is found by structural hash of the function as MetaSchedule tunes it (with and
    without the ``tirx.noalias`` that ``tune_tir`` adds); a run of a single workload whose hash no
    longer matches (the function was edited) still answers, flagged.
    """
    hashes = {str(tvm_ffi.structural_hash(mod)) for mod in workload_forms(func)}
    workloads = list(read_json_lines(Path(run_dir) / "database_workload.json"))
    wanted = {i for i, w in enumerate(workloads) if isinstance(w, list) and w and str(w[0]) in hashes}
    how = "structural hash"
    if not wanted and len(workloads) == 1:
        wanted, how = {0}, "single-workload fallback (the function changed since the run)"
    records = []
    for trial, row in enumerate(read_json_lines(Path(run_dir) / "database_tuning_record.json")):
        try:
            workload, (trace, run_secs) = row[0], row[1][:2]
            secs = [float(x) for x in run_secs or []]
        except (TypeError, ValueError, IndexError):
            continue
        if workload in wanted and secs and max(secs) < FAILED_SECONDS:
            records.append({"trial": trial, "trace": trace, "latency_us": sum(secs) / len(secs) * 1e6})
    return records, how


def _lineage(func, sch, source: dict) -> dict[str, str]:
    """Derived block → its source block, from the trace (``worker/lineage``), e.g. ``row_max_rf_init``
    → ``row_max``: what the graph match cannot pair (rfactor, decompose) is still attributed.  A
    failed replay gives no lineage (the match alone stands)."""
    from ..analysis.block_origin import lineage
    from .lineage import replay
    sources = [n["name"] for n in source["nodes"] if n.get("kind") == "block"]
    try:
        _, events = replay(fresh_copy(normalize_mod(func)), sch.trace)
        return {e["block"]: e["source"] for e in lineage(events, sources) if e.get("source") in sources}
    except Exception:  # noqa: BLE001 - lineage only adds attributions
        return {}


def block_graph(params: dict, emit=None, off=None) -> dict:
    """Source graph of one PrimFunc and the transformed graphs of some of its schedules.

    ``traces``: JSON traces ``[insts, decisions]`` as stored in MetaSchedule's database; or
    ``run_dir`` with ``records`` = ``"best"`` (default) or ``"all"``: the run's valid records of this
    function; with ``latency_us``, the record of that latency (the one a profile measured, as the
    re-measurement chose it; the fastest if none).  A trace that does not apply gives ``{"error": ...}`` in its slot; the others are still
    described.
    """
    parsed = parse_request(params)
    if isinstance(parsed, tvm.IRModule) and not any(isinstance(parsed[gv], tirx.PrimFunc)
                                                    for gv in parsed.get_global_vars()):
        raise ValueError("the unit has no PrimFunc (is it a Relax module? use relax_graph)")
    name, func = _prim_func(parsed, params.get("function"))
    out = {"function": name, "source": tir_graph(func), "transformed": []}
    jobs = [({"trace": t}) for t in params.get("traces") or []]
    if params.get("run_dir"):
        records, out["workload_match"] = run_records(params["run_dir"], func)
        fastest = sorted(records, key=lambda r: r["latency_us"])[:1]
        if params.get("latency_us") is not None:   # the record a profile measured (``services.hotspots``)
            records = [r for r in records if abs(r["latency_us"] - params["latency_us"]) < 1e-6][:1] or fastest
        elif params.get("records", "best") == "best":
            records = fastest
        jobs += records
    for job in jobs:
        info = {k: v for k, v in job.items() if k != "trace"}
        try:
            sch = apply_trace(func, job["trace"])
            graph = tir_graph(sch.mod["main"])
            out["transformed"].append({**graph, "record": info, "lineage": _lineage(func, sch, out["source"])})
        except Exception as err:  # a trace of another function, or of an edited one
            text = str(err).strip()
            out["transformed"].append({"error": text.splitlines()[0] if text else type(err).__name__,
                                       "record": info})
    return out


# --------------------------------------------------------------------------- Relax


HANDLERS = {wire.BLOCK_GRAPH: block_graph}
