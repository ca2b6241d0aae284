"""What one TVMScript function holds (``ast`` walk, nothing executed): blocks with their iterator
kinds, reads/writes, op counts, FLOPs and footprint; loops with extents and kinds; buffers; Relax
bindings."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from .model import Binding, Block, Buffer, Function, Loop, Unit
from .pysource import dotted_name, unit_kind, value_or_text
from .ranges import make_range, node_range
from .safety import gate_unit


LOOP_KINDS = {"grid": "grid", "serial": "serial", "range": "serial", "parallel": "parallel",
              "vectorized": "vectorized", "unroll": "unrolled", "thread_binding": "thread_binding"}


class _FunctionScanner:
    """Collects blocks, loops, buffers and bindings of one function body."""

    def __init__(self, fn: Function, ctx: "_Context"):
        self.fn, self.ctx = fn, ctx
        self.buffer_shapes: dict[str, tuple[list[Any], str]] = {}

    # -- buffers
    def add_buffer(self, name: str, call: ast.AST, kind: str, node: ast.AST) -> None:
        shape, dtype = self.buffer_spec(call)
        if shape is None:
            return
        self.fn.buffers.append(Buffer(name, shape, dtype, kind, self.ctx.range(node)))
        self.buffer_shapes[name] = (shape, dtype)

    def buffer_spec(self, call: ast.AST) -> tuple[list[Any] | None, str]:
        """Shape and dtype of ``T.Buffer((..), "f32")``, ``T.alloc_buffer``, ``R.Tensor`` etc."""
        if isinstance(call, ast.Subscript):  # T.Buffer[(16,), "float32"]
            elts = call.slice.elts if isinstance(call.slice, ast.Tuple) else [call.slice]
            args, keywords = list(elts), []
        elif isinstance(call, ast.Call):
            args, keywords = list(call.args), list(call.keywords)
        else:
            return None, ""
        name = dotted_name(call.value if isinstance(call, ast.Subscript) else call.func) or ""
        if name.split(".")[-1] == "match_buffer" and args:
            args = args[1:]
        shape_node = args[0] if args else next((k.value for k in keywords if k.arg == "shape"), None)
        dtype_node = args[1] if len(args) > 1 else next((k.value for k in keywords if k.arg == "dtype"), None)
        if shape_node is None:
            return None, ""
        shape = value_or_text(shape_node, self.ctx.constants)
        if not isinstance(shape, list):
            shape = [shape]
        dtype = value_or_text(dtype_node, self.ctx.constants) if dtype_node is not None else "float32"
        return shape, str(dtype)

    # -- walking
    def scan_params(self, node: ast.FunctionDef) -> None:
        for arg in node.args.args + node.args.kwonlyargs:
            if arg.annotation is not None and self._is_buffer_annotation(arg.annotation):
                self.add_buffer(arg.arg, arg.annotation, "param", arg)

    def _is_buffer_annotation(self, ann: ast.AST) -> bool:
        target = ann.value if isinstance(ann, ast.Subscript) else ann.func if isinstance(ann, ast.Call) else ann
        name = dotted_name(target) or ""
        return name.split(".")[-1] in ("Buffer", "Tensor")

    def walk(self, stmts: list[ast.stmt], loops: list[Loop], in_dataflow: bool = False) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.For):
                self.visit_for(stmt, loops)
            elif isinstance(stmt, ast.With):
                self.visit_with(stmt, loops)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self.visit_assign(stmt)
            elif isinstance(stmt, ast.If):
                self.walk(stmt.body, loops)
                self.walk(stmt.orelse, loops)
            elif isinstance(stmt, ast.While):
                self.walk(stmt.body, loops)

    def visit_for(self, node: ast.For, loops: list[Loop]) -> None:
        target = node.target
        names = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(target, ast.Tuple) \
            else [target.id] if isinstance(target, ast.Name) else []
        kind, extents, thread = self.loop_kind(node.iter, len(names))
        loop = Loop("", names, extents, kind, self.ctx.range(node))
        loop.thread = thread
        self.fn.loops.append(loop)
        first_block_index = len(self.fn.blocks)
        self.walk(node.body, loops + [loop])
        inner_blocks = self.fn.blocks[first_block_index:]
        loop.block = inner_blocks[0].name if inner_blocks else None
        path = ".".join(v for lp in loops + [loop] for v in lp.vars)
        loop.id = f"{self.fn.id}/{loop.block or ''}/{path}"
        for blk in inner_blocks:
            blk.loops.insert(0, loop.id)

    def loop_kind(self, it: ast.AST, n_vars: int) -> tuple[str, list[Any], str | None]:
        if not isinstance(it, ast.Call):
            return "serial", [value_or_text(it, self.ctx.constants)], None
        name = dotted_name(it.func) or ""
        short = name.split(".")[-1]
        kind = LOOP_KINDS.get(short, short or "serial")
        args = [value_or_text(a, self.ctx.constants) for a in it.args]
        thread = next((value_or_text(k.value, self.ctx.constants) for k in it.keywords if k.arg == "thread"), None)
        if kind == "grid":
            return kind, args, None
        if len(it.args) >= 2 and short != "thread_binding" or (short == "thread_binding" and len(it.args) >= 2
                                                               and thread is None):
            lo, hi = args[0], args[1]
            extent = hi - lo if isinstance(lo, int) and isinstance(hi, int) else f"{hi} - {lo}"
            return kind, [extent], thread
        return kind, args[:1] * max(n_vars, 1), thread

    def visit_with(self, node: ast.With, loops: list[Loop]) -> None:
        for item in node.items:
            expr = item.context_expr
            name = dotted_name(expr.func) if isinstance(expr, ast.Call) else None
            short = (name or "").split(".")[-1]
            if short in ("sblock", "block") and self.ctx.aliases.get((name or "").split(".")[0]) == "T":
                self.visit_block(node, expr, loops)
                return
        self.walk(node.body, loops)

    def visit_block(self, node: ast.With, call: ast.Call, loops: list[Loop]) -> None:
        name = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else "root"
        name = str(name)
        blk = Block(f"{self.fn.id}/{name}", name, self.ctx.range(node),
                    self.ctx.range(call.args[0]) if call.args else self.ctx.range(call))
        self.fn.blocks.append(blk)
        _BlockFacts(blk, self).collect(node.body)
        blk.iterations = _product([lp.extents for lp in loops])
        self.walk(node.body, loops)
        self.block_costs(blk)

    def block_costs(self, blk: Block) -> None:
        """FLOPs and footprint bytes of a block from its op counts and buffer shapes."""
        if blk.iterations is not None and blk.name != "root":
            blk.flops = blk.iterations * sum(blk.ops.values())
        total = 0
        for buf in sorted(set(blk.reads) | set(blk.writes)):
            shape, dtype = self.buffer_shapes.get(buf, (None, ""))
            size = _product([shape]) if shape else None
            if size is None:
                return
            total += size * _dtype_bytes(dtype)
        blk.bytes = total if blk.name != "root" else None

    def visit_assign(self, node: ast.stmt) -> None:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        value = node.value
        if value is None or not isinstance(target, ast.Name):
            return
        if isinstance(value, ast.Call):
            name = dotted_name(value.func) or ""
            short = name.split(".")[-1]
            if short in ("alloc_buffer", "sblock_alloc_buffer", "decl_buffer", "alloc_shared", "alloc_local"):
                self.add_buffer(target.id, value, "alloc", node)
                return
            if short == "match_buffer":
                self.add_buffer(target.id, value, "match", node)
                return
        if self.fn.kind == "relax_function":
            self.add_binding(target.id, value, node)

    def add_binding(self, name: str, value: ast.AST, node: ast.stmt) -> None:
        if isinstance(value, ast.Call):
            op = dotted_name(value.func) or ast.unparse(value.func)
            root = op.split(".")[0]
            if self.ctx.aliases.get(root) == "R":
                op = "R." + op.split(".", 1)[1] if "." in op else op
            args = []
            for arg in value.args:
                args.extend(sorted({n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}))
            # call_tir(cls.f, ...) names the PrimFunc
            if op.endswith("call_tir") and value.args:
                op = f"{op}:{ast.unparse(value.args[0])}"
        else:
            op, args = type(value).__name__, sorted({n.id for n in ast.walk(value) if isinstance(n, ast.Name)})
        self.fn.bindings.append(Binding(name, op, args, self.ctx.range(node)))


class _BlockFacts:
    """Iterator kinds, reads/writes and op counts of one block body (its own statements only)."""

    def __init__(self, blk: Block, scanner: _FunctionScanner):
        self.blk, self.scanner = blk, scanner

    def collect(self, body: list[ast.stmt]) -> None:
        listed: list[str] = []      # the buffers a T.reads(...) names
        init = False
        for stmt in body:
            if isinstance(stmt, ast.With) and self._is_nested_block(stmt):
                continue
            if isinstance(stmt, ast.With) and self._is_init(stmt):
                self._stores(stmt.body, count_ops=False)
                init = True
                continue
            self._axis(stmt)
            listed += self._explicit_access(stmt)
            self._stores([stmt], count_ops=True)
        if init:   # as TVM infers a reduction block's reads: its output is written, not read (C = C + A*B
            # reads A, B): read index 0 of MetaSchedule's cache_read is A
            self.blk.reads[:] = [b for b in self.blk.reads if b not in self.blk.writes or b in listed]

    def _is_nested_block(self, stmt: ast.With) -> bool:
        return any(isinstance(i.context_expr, ast.Call) and (dotted_name(i.context_expr.func) or "").split(".")[-1]
                   in ("sblock", "block") for i in stmt.items)

    def _is_init(self, stmt: ast.With) -> bool:
        return any(isinstance(i.context_expr, ast.Call) and (dotted_name(i.context_expr.func) or "").endswith(".init")
                   for i in stmt.items)

    def _axis(self, stmt: ast.stmt) -> None:
        if not isinstance(stmt, ast.Assign) or not isinstance(stmt.value, ast.Call):
            return
        name = dotted_name(stmt.value.func) or ""
        target = stmt.targets[0]
        names = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(target, ast.Tuple) \
            else [target.id] if isinstance(target, ast.Name) else []
        if name.endswith("axis.remap") and stmt.value.args and isinstance(stmt.value.args[0], ast.Constant):
            self.blk.iter_kinds += str(stmt.value.args[0].value)
            self.blk.iter_vars += names
        elif ".axis." in name:
            kind = name.rsplit(".", 1)[-1]
            letter = {"spatial": "S", "reduce": "R", "scan": "C", "opaque": "O"}.get(kind, "?")
            self.blk.iter_kinds += letter * len(names)
            self.blk.iter_vars += names

    def _explicit_access(self, stmt: ast.stmt) -> list[str]:
        """The buffers a ``T.reads``/``T.writes`` statement names, added to the block's; returns those
        of ``T.reads``."""
        if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
            return []
        name = (dotted_name(stmt.value.func) or "").split(".")[-1]
        if name not in ("reads", "writes"):
            return []
        found = []
        for arg in stmt.value.args:
            for n in ast.walk(arg):
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                    found.append(n.value.id)
                elif isinstance(n, ast.Name) and n.id in self.scanner.buffer_shapes:
                    found.append(n.id)
        target = self.blk.reads if name == "reads" else self.blk.writes
        for buf in found:
            if buf not in target:
                target.append(buf)
        return found if name == "reads" else []

    def _stores(self, stmts: list[ast.stmt], count_ops: bool) -> None:
        for stmt in stmts:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Assign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for tgt in targets:
                        if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name):
                            if tgt.value.id not in self.blk.writes:
                                self.blk.writes.append(tgt.value.id)
                    self._loads(node.value)
                    if count_ops and any(isinstance(t, ast.Subscript) for t in targets):
                        self._count_ops(node.value, node)

    def _loads(self, expr: ast.AST) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                name = node.value.id
                if name in self.scanner.buffer_shapes and name not in self.blk.reads:
                    self.blk.reads.append(name)

    def _count_ops(self, expr: ast.AST, stmt: ast.AST) -> None:
        ops = self.blk.ops
        if isinstance(stmt, ast.AugAssign):
            key = type(stmt.op).__name__.lower()
            ops[key] = ops.get(key, 0) + 1
        for node in ast.walk(expr):
            if isinstance(node, ast.BinOp):
                key = type(node.op).__name__.lower()
            elif isinstance(node, ast.Call):
                fname = (dotted_name(node.func) or "").split(".")[-1]
                if fname not in ("max", "min", "exp", "log", "sqrt", "tanh", "sigmoid", "if_then_else",
                                 "max_value", "min_value", "erf", "pow", "fabs", "abs", "rsqrt"):
                    continue
                if fname in ("max_value", "min_value"):
                    continue
                key = fname
            else:
                continue
            ops[key] = ops.get(key, 0) + 1


def _product(extent_lists: list[list[Any]]) -> int | None:
    total = 1
    for extents in extent_lists:
        for extent in extents:
            if not isinstance(extent, int) or isinstance(extent, bool):
                return None
            total *= extent
    return total


def _dtype_bytes(dtype: str) -> int:
    match = re.search(r"(\d+)", dtype or "")
    bits = int(match.group(1)) if match else 32
    if dtype.startswith("bool"):
        bits = 8
    return max(bits // 8, 1)


@dataclass
class _Context:
    lines: list[str]
    line_offset: int
    constants: dict
    aliases: dict

    def range(self, node: ast.AST) -> dict:
        return node_range(node, self.lines, self.line_offset)


def _function(node: ast.FunctionDef, kind: str, ctx: _Context, module: str | None, unit: str) -> Function:
    fid = f"{module}.{node.name}" if module else node.name
    name_line = node.lineno - 1 + ctx.line_offset
    text = ctx.lines[name_line] if name_line < len(ctx.lines) else ""
    col = text.find(node.name, node.col_offset)
    name_range = make_range(name_line, max(col, 0), name_line, max(col, 0) + len(node.name))
    fn = Function(fid, node.name, kind, ctx.range(node), name_range, module, unit)
    scanner = _FunctionScanner(fn, ctx)
    scanner.scan_params(node)
    try:
        scanner.walk(node.body, [])
    except RecursionError:
        pass  # keep what was found before the nesting got too deep
    return fn


def _unit(node: ast.stmt, ctx: _Context) -> tuple[Unit, list[Function]] | None:
    kind = unit_kind(node, ctx.aliases)
    if kind in ("unknown", "macro") or not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return None
    first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1 + ctx.line_offset
    last = (node.end_lineno or node.lineno) - 1 + ctx.line_offset
    rng = make_range(first, 0, last, len(ctx.lines[last]) if last < len(ctx.lines) else 0)
    unit = Unit(node.name, kind, first, last, rng)
    functions = []
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                fkind = unit_kind(item, ctx.aliases)
                if fkind in ("prim_func", "relax_function"):
                    functions.append(_function(item, fkind, ctx, node.name, node.name))
    else:
        functions.append(_function(node, kind, ctx, None, node.name))
    unit.functions = [f.id for f in functions]
    verdict = gate_unit(node, ctx.aliases, ctx.constants, ctx.lines, ctx.line_offset)
    unit.problems, unit.notes = verdict.problems, verdict.notes
    return unit, functions
