"""Which vendor-library call computes the same thing as a TIR PrimFunc (pure: stdlib ``ast`` on its
TVMScript text, nothing executed), so a GPU run can time cuDNN next to the tuned kernel.

``recognise(text)`` reads the PrimFunc (the source a user wrote, or ``mod.script()`` of the module
the run tuned: the same form) and answers one of

* ``{"op": "conv2d", "layout": "NHWC"|"NCHW", "kernel_layout": "HWIO"|"OIHW"|..., "stride": [sh, sw],
  "dilation": [dh, dw], "padding": [top, bottom, left, right], "groups": g, "data": i, "weight": j,
  "output": k, "shapes": {...}}`` — a 2-D convolution: one reduction block ``O[...] += D[...] * W[...]``
  over 4-D buffers, the data read either straight from a parameter or through a zero-padding block
  (``T.if_then_else(cond, X[v - p, ...], 0)``); ``data``/``weight``/``output`` are parameter positions;
* ``{"op": "matmul", ...}`` — ``C[i, j] += A[i, k] * B[k, j]`` on 2-D parameters;
* ``{"op": None, "why": "..."}`` — one line saying why no vendor call is recognised.

The recognition only proposes the call: the worker (``worker/baseline.py``) runs it on the same
inputs and keeps the vendor time only when its outputs equal the tuned kernel's.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..tvmscript.pysource import dotted_name

Affine = dict  # {var name or "": coefficient}; "" = constant


@dataclass
class Block:
    name: str
    kinds: dict = field(default_factory=dict)    # block var -> "S" | "R"
    stores: list = field(default_factory=list)   # (buffer, [index nodes], value node) outside T.init()


def _call_name(node) -> str:
    """``T.axis.remap`` of a call (or of a callee), "" when it is not a dotted name."""
    return dotted_name(node.func if isinstance(node, ast.Call) else node) or ""


def _int(node, consts: dict) -> int | None:
    try:
        return int(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError):
        pass
    if isinstance(node, ast.Name) and isinstance(consts.get(node.id), int):
        return consts[node.id]
    if isinstance(node, ast.BinOp):
        a, b = _int(node.left, consts), _int(node.right, consts)
        if a is not None and b is not None:
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            return ops.get(type(node.op))
    return None


def _shape(node, consts: dict) -> list[int] | None:
    if isinstance(node, (ast.Tuple, ast.List)):
        dims = [_int(e, consts) for e in node.elts]
        return None if None in dims else dims
    return None


def affine(node) -> Affine | None:
    """``v_yy * 2 + v_ry - 1`` -> ``{"v_yy": 2, "v_ry": 1, "": -1}``; None when not affine."""
    if isinstance(node, ast.Name):
        return {node.id: 1}
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return {"": node.value}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = affine(node.operand)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if isinstance(node, ast.BinOp):
        a, b = affine(node.left), affine(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, (ast.Add, ast.Sub)):
            sign = 1 if isinstance(node.op, ast.Add) else -1
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + sign * v
            return {k: v for k, v in out.items() if v != 0 or k == ""}
        if isinstance(node.op, ast.Mult):
            for x, y in ((a, b), (b, a)):
                if set(y) == {""}:
                    return {k: v * y[""] for k, v in x.items()}
    return None


def _indices(sub: ast.Subscript) -> list:
    sl = sub.slice
    return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]


def _subscript(node) -> tuple[str, list] | None:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return node.value.id, _indices(node)
    return None


class _Reader(ast.NodeVisitor):
    """Buffers (params in order, allocations) and blocks of the first PrimFunc."""

    def __init__(self, consts: dict):
        self.consts, self.params, self.shapes, self.blocks = consts, [], {}, []
        self._block: Block | None = None
        self._in_init = False

    def visit_FunctionDef(self, node):
        if self.params or not any("prim_func" in _call_name(d) for d in node.decorator_list):
            return
        for arg in node.args.args:
            ann = arg.annotation
            if isinstance(ann, ast.Call) and _call_name(ann).endswith("Buffer") and ann.args:
                self.params.append(arg.arg)
                self.shapes[arg.arg] = _shape(ann.args[0], self.consts)
        for stmt in node.body:
            self.visit(stmt)

    def visit_Assign(self, node):
        value = node.value
        if isinstance(value, ast.Call) and _call_name(value).endswith(("alloc_buffer", "sblock_alloc_buffer")) \
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and value.args:
            self.shapes[node.targets[0].id] = _shape(value.args[0], self.consts)
        elif self._block is not None and _call_name(value).endswith("axis.remap") and len(value.args) == 2:
            kinds = ast.literal_eval(value.args[0]) if isinstance(value.args[0], ast.Constant) else ""
            names = [t.id for t in getattr(node.targets[0], "elts", []) if isinstance(t, ast.Name)]
            self._block.kinds.update(zip(names, kinds))
        elif self._block is not None and not self._in_init:
            target = _subscript(node.targets[0]) if len(node.targets) == 1 else None
            if target:
                self._block.stores.append((target[0], target[1], value))

    def visit_With(self, node):
        call = node.items[0].context_expr if node.items else None
        name = _call_name(call) if call is not None else ""
        if name.endswith(("sblock", "block")) and isinstance(call, ast.Call) and call.args:
            outer, self._block = self._block, Block(str(getattr(call.args[0], "value", "")))
            self.blocks.append(self._block)
            self.generic_visit(node)
            self._block = outer
        elif name.endswith("init"):
            self._in_init = True
            self.generic_visit(node)
            self._in_init = False
        else:
            self.generic_visit(node)


def _consts(tree: ast.Module) -> dict:
    out = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _int(stmt.value, out)
            if value is not None:
                out[stmt.targets[0].id] = value
    return out


def _read(text: str) -> _Reader | str:
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return f"the TVMScript does not parse ({err.msg}, line {err.lineno})"
    reader = _Reader(_consts(tree))
    reader.visit(tree)
    if not reader.params:
        return "no PrimFunc with T.Buffer parameters"
    return reader


def _product(value) -> tuple[tuple[str, list], tuple[str, list], tuple[str, list]] | None:
    """(acc, a, b) of ``acc + a * b`` (either order), each (buffer, indices)."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for acc, mul in ((value.left, value.right), (value.right, value.left)):
        if isinstance(mul, ast.BinOp) and isinstance(mul.op, ast.Mult):
            parts = _subscript(acc), _subscript(mul.left), _subscript(mul.right)
            if None not in parts:
                return parts
    return None


def _reduction(reader: _Reader) -> tuple[Block, tuple] | str:
    found = [(b, p) for b in reader.blocks for (buf, idx, val) in b.stores
             if (p := _product(val)) is not None and p[0][0] == buf]
    if len(found) != 1:
        return ("no multiply-accumulate block (O[...] = O[...] + A[...] * B[...])" if not found
                else f"{len(found)} multiply-accumulate blocks (a vendor call is one operation)")
    return found[0]


def recognise(text: str) -> dict:
    """See the module docstring."""
    reader = _read(text)
    if isinstance(reader, str):
        return {"op": None, "why": reader}
    found = _reduction(reader)
    if isinstance(found, str):
        return {"op": None, "why": found}
    block, (out, a, b) = found
    others = [x.name for x in reader.blocks if x is not block and x.stores]   # the root block stores nothing
    dims = {len(idx) for _, idx in (out, a, b)}
    if dims == {2}:
        return _matmul(reader, block, out, a, b, others)
    if dims == {4}:
        return _conv2d(reader, block, out, a, b, others)
    return {"op": None, "why": f"block '{block.name}' multiplies {'/'.join(str(len(i)) for _, i in (out, a, b))}-D "
                               "buffers: only a 2-D matmul or a 4-D convolution is recognised"}


def _vars(idx: list) -> list[str | None]:
    out = []
    for node in idx:
        aff = affine(node)
        single = aff and len([k for k in aff if k]) == 1 and aff.get("", 0) == 0 and list(v for k, v in aff.items() if k) == [1]
        out.append(next(k for k in aff if k) if single else None)
    return out


def _matmul(reader, block, out, a, b, others) -> dict:
    (o, oi), (x, xi), (y, yi) = out, a, b
    ov, xv, yv = _vars(oi), _vars(xi), _vars(yi)
    if others or None in ov + xv + yv or len({o, x, y} & set(reader.params)) != 3:
        return {"op": None, "why": "not a plain matmul of the function's parameters"}
    i, j = ov
    for (p, pv), (q, qv) in (((x, xv), (y, yv)), ((y, yv), (x, xv))):
        if pv[0] == i and qv[1] == j and pv[1] == qv[0] and block.kinds.get(pv[1]) == "R":
            return {"op": "matmul", "a": reader.params.index(p), "b": reader.params.index(q),
                    "output": reader.params.index(o), "shapes": {n: reader.shapes.get(n) for n in (p, q, o)}}
    return {"op": None, "why": "a 2-D product that is not C[i, j] += A[i, k] * B[k, j]"}


def _padding(reader, data: str, others: list[str]) -> tuple[str, list[int]] | str:
    """(the parameter the data comes from, per-dimension leading offsets) through a zero-pad block."""
    if data in reader.params:
        return data, [0, 0, 0, 0]
    pads = [blk for blk in reader.blocks if blk.name in others and any(s[0] == data for s in blk.stores)]
    if len(pads) != 1 or len(pads[0].stores) != 1:
        return f"the convolution reads '{data}', which no single block of the function fills"
    _, idx, value = pads[0].stores[0]
    if _call_name(value).endswith("if_then_else") and len(value.args) == 3:
        value = value.args[1]
    src = _subscript(value)
    if src is None or src[0] not in reader.params:
        return f"block '{pads[0].name}' is not a zero-padding copy of a parameter"
    offsets = []
    for dst, s in zip(_vars(idx), src[1]):
        aff = affine(s)
        if dst is None or aff is None or {k for k in aff if k} != {dst} or aff[dst] != 1:
            return f"block '{pads[0].name}' is not a zero-padding copy of a parameter"
        offsets.append(-aff.get("", 0))
    return src[0], offsets


def _conv2d(reader, block, out, a, b, others) -> dict:
    (o, oi) = out
    ov = _vars(oi)
    if None in ov:
        return {"op": None, "why": "the 4-D product does not write its output at its loop variables"}
    if o not in reader.params:
        return {"op": None, "why": f"the product writes '{o}', not an output of the function: the function does more "
                                   "than one operation (no single vendor call computes it)"}
    reduce = {v for v, k in block.kinds.items() if k == "R"}
    for (d, di), (w, wi) in ((a, b), (b, a)):
        wv = [v if v is not None else None if affine(x) == {"": 0} else "!" for v, x in zip(_vars(wi), wi)]
        if "!" in wv:
            continue
        data = [affine(x) for x in di]
        if None in data:
            continue
        found = _conv_axes(ov, data, wv, reduce)
        if found is None:
            continue
        return _conv_result(reader, found, d, w, o, others, data)
    return {"op": None, "why": "a 4-D product that is not a 2-D convolution (O += D[n, h*s + r*d, ...] * W[...])"}


def _conv_axes(ov, data, wv, reduce) -> dict | None:
    """Positions of n, c, h, w in the data; o, i, kh, kw in the weight; strides and dilations."""
    spatial, n_pos, c_pos = [], None, None
    for pos, aff in enumerate(data):
        names = [k for k in aff if k]
        outs, reds = [k for k in names if k in ov], [k for k in names if k in reduce]
        if len(outs) == 1 and len(reds) == 1 and len(names) == 2:
            spatial.append((pos, outs[0], reds[0], aff[outs[0]], aff[reds[0]]))
        elif names == [ov[0]] and pos == 0:
            n_pos = pos
        elif len(names) == 1 and aff[names[0]] == 1:
            c_pos = (pos, names[0])
    if len(spatial) != 2 or n_pos is None or c_pos is None:
        return None
    kh, kw = spatial[0][2], spatial[1][2]
    channel = c_pos[1]
    depthwise = channel in ov              # the data's channel is an output channel: one group a channel
    out_ch = next((v for v in ov if v not in (ov[0], spatial[0][1], spatial[1][1])), None)
    if out_ch is None or (depthwise and channel != out_ch) or (not depthwise and channel not in reduce):
        return None
    letters = {out_ch: "O", kh: "H", kw: "W"}
    if not depthwise:
        letters[channel] = "I"
    kernel = "".join(letters.get(v, "I") for v in wv) if all(v in letters or v is None for v in wv) else None
    if kernel is None or sorted(kernel) != sorted("OIHW"):
        return None
    layout = [""] * 4
    layout[n_pos], layout[c_pos[0]], layout[spatial[0][0]], layout[spatial[1][0]] = "N", "C", "H", "W"
    out_layout = ["N" if v == ov[0] else "C" if v == out_ch else "H" if v == spatial[0][1] else "W" for v in ov]
    return {"layout": "".join(layout), "out_layout": "".join(out_layout), "kernel_layout": kernel,
            "stride": [spatial[0][3], spatial[1][3]], "dilation": [spatial[0][4], spatial[1][4]],
            "depthwise": depthwise, "offset": [data[spatial[0][0]].get("", 0), data[spatial[1][0]].get("", 0)],
            "spatial_pos": [spatial[0][0], spatial[1][0]], "c_pos": c_pos[0]}


def _conv_result(reader, axes: dict, d: str, w: str, o: str, others: list[str], data: list) -> dict:
    if axes["layout"] != axes["out_layout"]:
        return {"op": None, "why": f"the output layout {axes['out_layout']} differs from the input's {axes['layout']}"}
    source = _padding(reader, d, others)
    if isinstance(source, str):
        return {"op": None, "why": source}
    x, offsets = source
    rest = [n for n in others if not any(s[0] == d for blk in reader.blocks if blk.name == n for s in blk.stores)]
    if rest:
        return {"op": None, "why": f"the function does more than a convolution (blocks {', '.join(rest)}): "
                                   "no single vendor call computes it"}
    if w not in reader.params:
        return {"op": None, "why": f"the weight '{w}' is not a function parameter"}
    xs, ps, os_ = reader.shapes.get(x), reader.shapes.get(d), reader.shapes.get(o)
    if not xs or not ps or not os_:
        return {"op": None, "why": "the buffers' shapes are not constant"}
    ws = reader.shapes.get(w)
    if not ws:
        return {"op": None, "why": "the weight's shape is not constant"}
    (ph, pw), (sh, sw), (dh, dw) = axes["spatial_pos"], axes["stride"], axes["dilation"]
    kh, kw = ws[axes["kernel_layout"].index("H")], ws[axes["kernel_layout"].index("W")]
    top, left = offsets[ph] - axes["offset"][0], offsets[pw] - axes["offset"][1]
    # the trailing padding the output needs (a larger pad buffer is never read past it)
    bottom = max(0, (os_[ph] - 1) * sh + dh * (kh - 1) + 1 - xs[ph] - top)
    right = max(0, (os_[pw] - 1) * sw + dw * (kw - 1) + 1 - xs[pw] - left)
    if offsets[axes["c_pos"]] or offsets[0] or top < 0 or left < 0:
        return {"op": None, "why": "the padding block pads the batch or channel dimension"}
    channels = xs[axes["c_pos"]]
    return {"op": "conv2d", "layout": axes["layout"], "kernel_layout": axes["kernel_layout"],
            "stride": axes["stride"], "dilation": axes["dilation"], "padding": [top, bottom, left, right],
            "groups": channels if axes["depthwise"] else 1,
            "data": reader.params.index(x), "weight": reader.params.index(w), "output": reader.params.index(o),
            "shapes": {"data": xs, "weight": reader.shapes.get(w), "output": os_}}


def describe(conv: dict) -> str:
    """``conv2d NHWC/HWIO, stride 1×1, padding 1,1,1,1`` for notes."""
    pad = ",".join(str(p) for p in conv["padding"])
    groups = f", groups {conv['groups']}" if conv.get("groups", 1) != 1 else ""
    dil = f", dilation {conv['dilation'][0]}×{conv['dilation'][1]}" if conv["dilation"] != [1, 1] else ""
    return (f"conv2d {conv['layout']}/{conv['kernel_layout']}, stride {conv['stride'][0]}×{conv['stride'][1]}, "
            f"padding {pad}{dil}{groups}")
