"""Dataflow graphs of TIR and Relax programs as plain data, for matching hotspots to source.

The worker only *describes* programs here; the matching itself is TVM-free
(``asight_lsp.analysis.matching``).  Two request handlers:

* ``block_graph``  — a PrimFunc as parsed (the source) and, optionally, the same function with one or
  more MetaSchedule traces applied (the transformed programs).  Nodes are blocks (plus the input
  buffers as ``param`` nodes), edges go producer → consumer through buffers.
* ``relax_graph``  — a Relax function's bindings (the source) and the program MetaSchedule tunes:
  LegalizeOps → AnnotateTIROpPattern → FoldConstant → FuseOps (→ FuseTIR names the tasks), expanded
  to the legalized calls inside each fused group, with def-use edges across groups.

Every node carries the labels the matcher compares (iterator kinds, op mix, written buffer shape and
dtype, op pattern) and the supporting evidence it may use (names, TVMScript lines from spans).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from .compat import Trace, host_target, normalize_mod, relax, s_tir, stmt_children, tirx, tvm, tvm_ffi
from .parse import parse_request

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


def fresh_copy(func):
    """A deep copy of ``func`` (spans kept).

    TVM 0.27's ``rfactor`` mutates the PrimFunc it was given in place (a copy-on-write slip), which
    would corrupt the parse cache and make every later replay of an rfactor trace fail.
    """
    return tvm.ir.load_json(tvm.ir.save_json(func))


def apply_trace(func, trace_json):
    """``func`` (normalised as MetaSchedule tunes it) with a JSON trace replayed, postprocs included."""
    sch = s_tir.Schedule(normalize_mod(fresh_copy(func)))
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


FAILED_SECONDS = 1e9   # MetaSchedule stores failed builds/runs as run_secs [1e10]


def _json_lines(path: Path) -> list:
    """JSON values of a line-per-record file; a torn or garbled line is skipped."""
    out = []
    try:
        with path.open("r", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return out


def run_records(run_dir: str, func) -> tuple[list[dict], str]:
    """Valid records of ``func`` in a run's JSON database (trial order) and how the workload matched.

    The workload is found by structural hash of the function as MetaSchedule tunes it (with and
    without the ``tirx.noalias`` that ``tune_tir`` adds); a run of a single workload whose hash no
    longer matches (the function was edited) still answers, flagged.
    """
    hashes = {str(tvm_ffi.structural_hash(normalize_mod(func))),
              str(tvm_ffi.structural_hash(tvm.IRModule({"main": func})))}
    workloads = _json_lines(Path(run_dir) / "database_workload.json")
    wanted = {i for i, w in enumerate(workloads) if isinstance(w, list) and w and str(w[0]) in hashes}
    how = "structural hash"
    if not wanted and len(workloads) == 1:
        wanted, how = {0}, "single-workload fallback (the function changed since the run)"
    records = []
    for trial, row in enumerate(_json_lines(Path(run_dir) / "database_tuning_record.json")):
        try:
            workload, (trace, run_secs) = row[0], row[1][:2]
            secs = [float(x) for x in run_secs or []]
        except (TypeError, ValueError, IndexError):
            continue
        if workload in wanted and secs and max(secs) < FAILED_SECONDS:
            records.append({"trial": trial, "trace": trace, "latency_us": sum(secs) / len(secs) * 1e6})
    return records, how


def block_graph(params: dict, emit=None) -> dict:
    """Source graph of one PrimFunc and the transformed graphs of some of its schedules.

    ``traces``: JSON traces ``[insts, decisions]`` as stored in MetaSchedule's database; or
    ``run_dir`` with ``records`` = ``"best"`` (default) or ``"all"``: the run's valid records of this
    function.  A trace that does not apply gives ``{"error": ...}`` in its slot; the others are still
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
        if params.get("records", "best") == "best":
            records = sorted(records, key=lambda r: r["latency_us"])[:1]
        jobs += records
    for job in jobs:
        info = {k: v for k, v in job.items() if k != "trace"}
        try:
            graph = tir_graph(apply_trace(func, job["trace"]).mod["main"])
            out["transformed"].append({**graph, "record": info})
        except Exception as err:  # a trace of another function, or of an edited one
            text = str(err).strip()
            out["transformed"].append({"error": text.splitlines()[0] if text else type(err).__name__,
                                       "record": info})
    return out


# --------------------------------------------------------------------------- Relax


def _bindings(func) -> list:
    return [b for block in func.body.blocks for b in block.bindings]


def _tensor(var) -> tuple[list, str]:
    ty = getattr(var, "ty", None)
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    dims = [_int(v) for v in values] if values is not None else []
    dtype = str(getattr(ty, "dtype", "") or "")
    return dims, dtype


def _var_uses(expr) -> list[str]:
    """Names of the Relax vars an expression reads, in first-use order."""
    names: list[str] = []

    def visit(e):
        if isinstance(e, relax.Var) and e.name not in names:
            names.append(e.name)
    relax.analysis.post_order_visit(expr, visit)
    return names


def _call_op(value) -> tuple[str, str | None]:
    """(op label, callee PrimFunc name) of a binding's value."""
    if isinstance(value, relax.Call):
        op = value.op
        if isinstance(op, tvm.ir.GlobalVar):
            return op.name_hint, op.name_hint
        name = str(getattr(op, "name", op))
        if name in ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed") and value.args \
                and isinstance(value.args[0], tvm.ir.GlobalVar):
            return value.args[0].name_hint, value.args[0].name_hint
        return name, None
    return type(value).__name__, None


def normal_op(name: str) -> str:
    """``relax.nn.conv2d`` -> ``conv2d``; ``add1`` -> ``add`` (LegalizeOps' de-duplicated names)."""
    return _DIGITS.sub("", str(name).split(".")[-1]) or str(name)


def _prim_flops(func) -> int | None:
    total = 0
    for _, realize in _realizes(func):
        node = block_node(realize, 0, "")
        if node["flops"] is None:
            return None
        total += node["flops"]
    return total


def _pipeline(target):
    return [*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern()]


def relax_source_graph(mod, legal, fn: str) -> dict:
    """Params and bindings of the parsed function; labels from the legalized twin of each binding.

    LegalizeOps rewrites bindings in place, so the i-th binding of each dataflow block of ``legal``
    is the i-th of ``mod`` whenever the counts agree (position, not names); otherwise by name.
    """
    func = mod[fn]
    nodes, edges = [], []
    for p in func.params:
        shape, dtype = _tensor(p)
        nodes.append({"id": f"param:{p.name}", "kind": "param", "name": p.name, "shape": shape, "dtype": dtype})
    twins = _legal_twins(func, legal[fn])
    defined = {p.name: f"param:{p.name}" for p in func.params}
    for b, twin in zip(_bindings(func), twins):
        op, _ = _call_op(b.value)
        shape, dtype = _tensor(b.var)
        callee = _call_op(twin.value)[1] if twin is not None else None
        prim = legal[callee] if callee and callee in [g.name_hint for g in legal.get_global_vars()] else None
        span = b.value.span
        node = {"id": b.var.name, "kind": "binding", "name": b.var.name, "op": op, "op_label": normal_op(op),
                "legal_op": normal_op(callee) if callee else None,
                "pattern": _pattern(prim), "shape": shape, "dtype": dtype,
                "flops": _prim_flops(prim) if isinstance(prim, tirx.PrimFunc) else None,
                "lines": None if span is None else [int(span.line), int(span.end_line)]}
        nodes.append(node)
        for used in _var_uses(b.value):
            if used in defined:
                edges.append({"src": defined[used], "dst": node["id"]})
        defined[b.var.name] = node["id"]
    return {"kind": "relax", "function": fn, "nodes": nodes, "edges": edges}


def _legal_twins(func, legal_func) -> list:
    """The legalized binding of each source binding (None where there is none), in source order."""
    twins: list = []
    blocks = list(legal_func.body.blocks)
    for i, blk in enumerate(func.body.blocks):
        src = list(blk.bindings)
        leg = list(blocks[i].bindings) if i < len(blocks) else []
        if len(src) == len(leg):
            twins += leg
        else:
            by_name = {b.var.name: b for b in leg}
            twins += [by_name.get(b.var.name) for b in src]
    return twins


def _pattern(prim) -> int | None:
    if isinstance(prim, tirx.PrimFunc) and prim.attrs is not None and "op_pattern" in prim.attrs:
        return int(prim.attrs["op_pattern"])
    return None


def relax_task_graph(grouped, fused_tir, fn: str) -> dict:
    """The tuned program: every kernel call of ``fn`` expanded to the legalized calls it fuses.

    Each node is one legalized call inside a call site (``<site>/<var>``), labelled with the
    PrimFunc it calls (its op), pattern, output shape/dtype and FLOPs; ``site`` numbers the kernel
    calls in execution order and ``function`` names the kernel (the MetaSchedule task's PrimFunc
    after FuseTIR).  Edges are def-use, across sites through the caller's variables.
    """
    func = grouped[fn]
    names = {g.name_hint for g in grouped.get_global_vars()}
    kernels = {g.name_hint for g in fused_tir.get_global_vars()}
    nodes, edges, sites = [], [], []
    produced = {p.name: [f"param:{p.name}"] for p in func.params}
    for p in func.params:
        shape, dtype = _tensor(p)
        nodes.append({"id": f"param:{p.name}", "kind": "param", "name": p.name, "shape": shape, "dtype": dtype})
    for b in _bindings(func):
        value = b.value
        op, callee = _call_op(value)
        target = grouped[callee] if callee in names else None
        if isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
            outs = produced.get(value.tuple_value.name, [])
            produced[b.var.name] = [outs[value.index]] if value.index < len(outs) else outs
            continue
        if isinstance(target, relax.Function):
            site_nodes, outs = _expand_group(grouped, target, value, len(sites), produced, edges)
        elif isinstance(target, tirx.PrimFunc):
            site_nodes, outs = _single_call(target, value, b.var, len(sites), produced, edges)
        else:  # a tuple, a VM builtin, a packed call: pass the producers through
            produced[b.var.name] = [x for u in _var_uses(value) for x in produced.get(u, [])]
            continue
        sites.append({"site": len(sites), "function": callee, "var": b.var.name,
                      "nodes": [n["id"] for n in site_nodes],
                      "flops": _prim_flops(fused_tir[callee]) if callee in kernels else None})
        nodes += site_nodes
        produced[b.var.name] = outs
    return {"kind": "relax", "function": fn, "nodes": nodes, "edges": edges, "sites": sites}


def _inner_node(grouped, binding, site: int, function: str) -> dict:
    op, callee = _call_op(binding.value)
    prim = grouped[callee] if callee else None
    shape, dtype = _tensor(binding.var)
    return {"id": f"{site}/{binding.var.name}", "kind": "call", "name": binding.var.name, "site": site,
            "function": function, "op": callee or op, "op_label": normal_op(callee or op),
            "pattern": _pattern(prim), "shape": shape, "dtype": dtype,
            "flops": _prim_flops(prim) if isinstance(prim, tirx.PrimFunc) else None}


def _expand_group(grouped, group, call, site: int, produced: dict, edges: list):
    function = call.op.name_hint
    arg_producers = [[x for u in _var_uses(a) for x in produced.get(u, [])] for a in call.args]
    param_map = {p.name: arg_producers[i] if i < len(arg_producers) else [] for i, p in enumerate(group.params)}
    local, nodes = dict(param_map), []
    for b in _bindings(group):
        if not isinstance(b.value, relax.Call):
            local[b.var.name] = [x for u in _var_uses(b.value) for x in local.get(u, [])]
            continue
        node = _inner_node(grouped, b, site, function)
        nodes.append(node)
        for used in _var_uses(b.value):
            for src in local.get(used, []):
                edges.append({"src": src, "dst": node["id"]})
        local[b.var.name] = [node["id"]]
    body = group.body.body
    outs = [x for u in _var_uses(body) for x in local.get(u, [])]
    return nodes, outs


def _single_call(prim, call, var, site: int, produced: dict, edges: list):
    _, callee = _call_op(call)
    shape, dtype = _tensor(var)
    node = {"id": f"{site}/{var.name}", "kind": "call", "name": var.name, "site": site, "function": callee,
            "op": callee, "op_label": normal_op(callee), "pattern": _pattern(prim), "shape": shape,
            "dtype": dtype, "flops": _prim_flops(prim)}
    for used in _var_uses(call):
        for src in produced.get(used, []):
            edges.append({"src": src, "dst": node["id"]})
    return [node], [node["id"]]


def relax_graph(params: dict, emit=None) -> dict:
    """Source bindings and tuned kernel calls of a Relax function (default ``main``)."""
    parsed = parse_request(params)
    fn = params.get("function") or "main"
    if not isinstance(parsed, tvm.IRModule) or fn not in [g.name_hint for g in parsed.get_global_vars()] \
            or not isinstance(parsed[fn], relax.Function):
        raise ValueError(f"no Relax function '{fn}' in the unit")
    target = host_target()
    legal = tvm.transform.Sequential(_pipeline(target))(parsed)
    grouped = tvm.transform.Sequential([relax.transform.FoldConstant(), relax.transform.FuseOps()])(legal)
    fused_tir = relax.transform.FuseTIR()(grouped)
    return {"function": fn, "source": relax_source_graph(parsed, legal, fn),
            "transformed": relax_task_graph(grouped, fused_tir, fn)}


HANDLERS = {"block_graph": block_graph, "relax_graph": relax_graph}
