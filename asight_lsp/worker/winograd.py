"""The Winograd lever (issue 21; docs/models.md "Levers"): each channels-last 3x3 convolution of stride 1
on a constant weight that ``analysis/levers.winograd_fits`` passes is computed as Winograd F(4x4, 3x3).

The weight is transformed here, once, in numpy (``packed_weight``: U = G g G^T, a constant the
kernel reads); the kernel (``winograd_nhwc``, a TE compute named ``conv2d_winograd``) transforms
6x6 input tiles (``data_pack``), multiplies them with U per tile position (``bgemm``: 36 batched
GEMMs of tiles x input channels x output channels), and transforms the products back to 4x4 output
tiles (``inverse``).  Its blocks carry TOPI's ``schedule_rule`` names, so MetaSchedule's own Winograd
rules schedule the transforms and its multi-level tiling the GEMM.  The binding keeps its name, so the
views put the kernel at the convolution's line; FuseOps fuses its epilogue (bias, residual, ReLU).
"""
from __future__ import annotations

import numpy as np

from ..analysis import levers

from .compat import relax, te, tvm, winograd_parts

KERNEL = 3
NAME = "conv2d_winograd"


def packed_weight(weight_ohwi: np.ndarray, tile: int = levers.WINOGRAD_TILE) -> np.ndarray:
    """The weight in the Winograd domain, ``U[eps, nu, co, ci] = sum G[eps, kh] w[co, kh, kw, ci]
    G[nu, kw]`` (alpha x alpha x out x in channels), computed in float64."""
    (_, _, g), _, _ = winograd_parts(tile, KERNEL)
    u = np.einsum("ek,okwi,nw->enoi", g, weight_ohwi.astype(np.float64), g)
    return u.astype(weight_ohwi.dtype)


def winograd_nhwc(data, packed, padding: tuple, tile: int = levers.WINOGRAD_TILE):
    """The convolution of NHWC ``data`` with the packed weight (``packed_weight``), ``padding`` (top,
    left, bottom, right), as TE: the output tiles past the edge are computed and dropped."""
    n, h, w, ci = (int(x) for x in data.shape)
    alpha, co = int(packed.shape[0]), int(packed.shape[2])
    (a_np, b_np, _), const_matrix, pad = winograd_parts(tile, KERNEL)
    dtype = str(data.dtype)
    a, b = const_matrix(a_np.astype(dtype), "A"), const_matrix(b_np.astype(dtype), "B")
    top, left, bottom, right = padding
    oh, ow = h + top + bottom - KERNEL + 1, w + left + right - KERNEL + 1
    nh, nw = -(-oh // tile), -(-ow // tile)
    tiles = n * nh * nw
    padded = pad(data, (0, top, left, 0),
                 (0, bottom + (nh - 1) * tile + alpha - (h + top + bottom),
                  right + (nw - 1) * tile + alpha - (w + left + right), 0),
                 name="data_pad", attrs={"schedule_rule": "None"})
    input_tile = te.compute((alpha, alpha, tiles, ci), lambda eps, nu, p, c: padded[
        p // (nh * nw), (p // nw) % nh * tile + eps, p % nw * tile + nu, c],
        name="input_tile", attrs={"schedule_rule": "None"})
    data_pack = _transformed(input_tile, b, (alpha, alpha, tiles, ci), "data_pack",
                             "conv2d_nhwc_winograd_data_pack")
    k = te.reduce_axis((0, ci), "ci")
    bgemm = te.compute((alpha, alpha, tiles, co), lambda eps, nu, p, o: te.sum(
        data_pack[eps, nu, p, k] * packed[eps, nu, o, k], axis=[k]),
        name="bgemm", attrs={"meta_schedule.write_cache_level": [2]})
    inverse = _transformed(bgemm, a, (tile, tile, tiles, co), "inverse", "conv2d_nhwc_winograd_inverse")
    return te.compute((n, oh, ow, co), lambda b_, y, x, o: inverse[
        y % tile, x % tile, b_ * nh * nw + y // tile * nw + x // tile, o], name=NAME)


def _transformed(source, matrix, shape: tuple, name: str, rule: str):
    """``out[i, j, p, c] = sum_{r, s} source[r, s, p, c] matrix[r, i] matrix[s, j]`` (a tile transform)."""
    alpha = int(source.shape[0])
    r, s = te.reduce_axis((0, alpha), "r_a"), te.reduce_axis((0, alpha), "r_b")
    return te.compute(shape, lambda i, j, p, c: te.sum(
        source[r, s, p, c] * matrix[r, i] * matrix[s, j], axis=[r, s]), name=name, attrs={"schedule_rule": rule})


def conv_facts(call) -> dict | None:
    """What ``levers.winograd_fits`` judges of a ``relax.nn.conv2d`` call, or None when its weight is
    not a constant (a parameter would be transformed at every call) or a shape is not static."""
    if len(call.args) < 2 or not isinstance(call.args[1], tvm.ir.expr.Constant):
        return None
    attrs, out, data = call.attrs, call.ty, call.args[0].ty
    try:
        out_shape = [int(x) for x in out.shape]
        in_channels = int(data.shape[3])
    except (TypeError, AttributeError, IndexError):
        return None
    weight = call.args[1].value.numpy()
    return {"layouts": (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout or attrs.data_layout)),
            "dtype": str(out.dtype), "kernel": weight.shape[1:3] if weight.ndim == 4 else (),
            "strides": [int(x) for x in attrs.strides], "dilation": [int(x) for x in attrs.dilation],
            "groups": int(attrs.groups), "out": out_shape, "in_channels": in_channels}


def rewrite(mod) -> tuple[object, int]:
    """``mod`` with every convolution ``levers.winograd_fits`` passes computed as Winograd, in each
    Relax function (the bindings keep their names), and how many were."""
    out, count = mod, 0
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function):
            mutator = _Winograd(out)
            new = mutator.visit_expr(func)
            if mutator.rewritten:
                out = mutator.builder_.get()
                out[gv] = new
                count += mutator.rewritten
    return out, count


@relax.expr_functor.mutator
class _Winograd(relax.PyExprMutator):
    def __init__(self, mod=None):
        super().__init__(mod)
        self.conv = tvm.ir.Op.get("relax.nn.conv2d")
        self.rewritten = 0

    def visit_var_binding_(self, binding) -> None:
        value = binding.value
        facts = conv_facts(value) if isinstance(value, relax.Call) and value.op.same_as(self.conv) else None
        if facts is None or not levers.winograd_fits(facts):
            super().visit_var_binding_(binding)
            return
        packed = relax.const(packed_weight(value.args[1].value.numpy()))
        padding = tuple(int(x) for x in value.attrs.padding)
        call = self.builder_.call_te(winograd_nhwc, self.visit_expr(value.args[0]), packed, padding,
                                     primfunc_name_hint=NAME)
        var = binding.var
        kind = relax.DataflowVar if isinstance(var, relax.DataflowVar) else relax.Var
        new = kind(var.name, var.ty)
        self.builder_.emit_normalized(relax.VarBinding(new, self.builder_.normalize(call)))
        self.set_var_remap(var, new)
        self.rewritten += 1
