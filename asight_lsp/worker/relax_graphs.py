"""Dataflow graph of a Relax function (TVM side), for matching hotspots to source bindings.

``relax_graph``: the function's bindings (the source) and the program MetaSchedule tunes
(``relax_pipeline``: legalize -> fuse; FuseTIR names the tasks), expanded to the legalized calls
inside each fused group, with def-use edges across groups.  Matching is ``analysis/matching.py``.
"""
from __future__ import annotations

from ..engine import wire
from .compat import host_target, relax, tirx, tvm
from .parse import parse_request
from .relax_pipeline import bindings, converted, deployable, group, legalize
from .tir_graphs import _DIGITS, _int, _realizes, block_node
from .tune_plan import params_levers


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


def relax_source_graph(mod, legal, fn: str, lines: dict | None = None) -> dict:
    """Params and bindings of the parsed function; labels from the legalized twin of each binding.

    LegalizeOps rewrites bindings in place, so the i-th binding of each dataflow block of ``legal``
    is the i-th of ``mod`` whenever the counts agree (position, not names); otherwise by name.
    ``lines`` (binding name -> [line, end line]) where ``mod`` is the parsed function after a pass that
    lost the spans (channels-last: ``relax_pipeline.converted``); a binding it lacks has no line.
    """
    func = mod[fn]
    nodes, edges = [], []
    for p in func.params:
        shape, dtype = _tensor(p)
        nodes.append({"id": f"param:{p.name}", "kind": "param", "name": p.name, "shape": shape, "dtype": dtype})
    twins = _legal_twins(func, legal[fn])
    defined = {p.name: f"param:{p.name}" for p in func.params}
    for b, twin in zip(bindings(func), twins):
        op, _ = _call_op(b.value)
        shape, dtype = _tensor(b.var)
        callee = _call_op(twin.value)[1] if twin is not None else None
        prim = legal[callee] if callee and callee in [g.name_hint for g in legal.get_global_vars()] else None
        span = b.value.span
        node = {"id": b.var.name, "kind": "binding", "name": b.var.name, "op": op, "op_label": normal_op(op),
                "legal_op": normal_op(callee) if callee else None,
                "pattern": _pattern(prim), "shape": shape, "dtype": dtype,
                "flops": _prim_flops(prim) if isinstance(prim, tirx.PrimFunc) else None,
                "lines": lines.get(b.var.name) if lines is not None else _span_lines(span)}
        nodes.append(node)
        for used in _var_uses(b.value):
            if used in defined:
                edges.append({"src": defined[used], "dst": node["id"]})
        defined[b.var.name] = node["id"]
    return {"kind": "relax", "function": fn, "nodes": nodes, "edges": edges}


def _span_lines(span) -> list[int] | None:
    return None if span is None else [int(span.line), int(span.end_line)]


def binding_lines(func) -> dict:
    """Binding name -> [line, end line] of a parsed Relax function (bindings without a span left out)."""
    return {b.var.name: _span_lines(b.value.span) for b in bindings(func) if b.value.span is not None}


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
    for b in bindings(func):
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
    for b in bindings(group):
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


def relax_graph(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """Source bindings and tuned kernel calls of a Relax function (default ``main``), through the
    pipeline without the request's levers ``off`` (its run's, ``tune_plan.params_levers``)."""
    off = params_levers(params) if off is None else off
    parsed = parse_request(params)
    fn = params.get("function") or "main"
    if not isinstance(parsed, tvm.IRModule) or fn not in [g.name_hint for g in parsed.get_global_vars()] \
            or not isinstance(parsed[fn], relax.Function):
        raise ValueError(f"no Relax function '{fn}' in the unit")
    target = host_target()
    parsed, _ = deployable(parsed, fn, params.get("weights"))    # the build tuned, profiled and exported
    legal = legalize(parsed, target, off=off)
    grouped = group(parsed, target, off=off)
    fused_tir = relax.transform.FuseTIR()(grouped)
    layouts = converted(parsed, target, off=off)        # the source as tuned: its layout transforms, the model's lines
    source = relax_source_graph(layouts, legal, fn, binding_lines(parsed[fn])) if layouts is not parsed \
        else relax_source_graph(parsed, legal, fn)
    return {"function": fn, "source": source,
            "transformed": relax_task_graph(grouped, fused_tir, fn)}


HANDLERS = {wire.RELAX_GRAPH: relax_graph}
