"""TVM-free source map of a TVMScript file, from the standard library's ``ast`` only.

It finds every unit (a top-level ``@I.ir_module`` class, ``@T.prim_func`` or ``@R.function`` def),
and inside each function its blocks (``T.sblock`` names), loops, buffers and Relax bindings, each
with a 0-based LSP range and a stable id:

* function id: ``Module.func`` inside an IRModule class, else ``func``
* block id:    ``<function id>/<block name>``
* loop id:     ``<function id>/<first block inside the loop>/<loop vars from the outermost loop>``

Nothing here executes the file.  A file that does not parse as a whole is split at top-level
decorators and each chunk is parsed alone, so one half-typed function does not hide the others.
"""
from __future__ import annotations

import ast
import re
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

from .ranges import line_range, make_range, node_range
from .safety import check_unit

# Namespaces TVMScript files import under (``from tvm.script import tirx as T``).
NAMESPACE_MODULES = {"tir": "T", "tirx": "T", "relax": "R", "ir": "I"}
DEFAULT_ALIASES = {"T": "T", "R": "R", "I": "I"}
LOOP_KINDS = {"grid": "grid", "serial": "serial", "range": "serial", "parallel": "parallel",
              "vectorized": "vectorized", "unroll": "unrolled", "thread_binding": "thread_binding"}
MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclass
class Loop:
    id: str
    vars: list[str]
    extents: list[Any]
    kind: str
    range: dict
    block: str | None = None
    thread: str | None = None


@dataclass
class Block:
    id: str
    name: str
    range: dict
    name_range: dict
    iter_kinds: str = ""
    iter_vars: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    ops: dict = field(default_factory=dict)
    iterations: int | None = None
    flops: int | None = None
    bytes: int | None = None


@dataclass
class Buffer:
    name: str
    shape: list[Any]
    dtype: str
    kind: str  # param | alloc | match
    range: dict


@dataclass
class Binding:
    name: str
    op: str
    args: list[str]
    range: dict


@dataclass
class Function:
    id: str
    name: str
    kind: str  # prim_func | relax_function
    range: dict
    name_range: dict
    module: str | None = None
    unit: str = ""
    blocks: list[Block] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)


@dataclass
class Unit:
    """A top-level decorated def or class: what the worker parses on its own."""
    name: str
    kind: str  # ir_module | prim_func | relax_function | unknown
    start_line: int  # 0-based, decorators included
    end_line: int    # 0-based, inclusive
    range: dict
    functions: list[str] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # "not evaluated" diagnostics of the safety gate

    @property
    def safe(self) -> bool:
        return not self.problems


@dataclass
class Outline:
    path: str
    units: list[Unit] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=lambda: dict(DEFAULT_ALIASES))
    syntax_errors: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def function(self, name_or_id: str) -> Function | None:
        for fn in self.functions:
            if name_or_id in (fn.id, fn.name):
                return fn
        return None


# --------------------------------------------------------------------------- parsing


def decode_source(data: bytes | str) -> str:
    """Text of a file; undecodable bytes become U+FFFD rather than an exception."""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


def syntax_error_dict(err: BaseException, lines: list[str], line_offset: int = 0) -> dict:
    """A diagnostic dict for a ``SyntaxError`` (or the errors ``ast.parse`` raises on garbage)."""
    if isinstance(err, SyntaxError) and err.lineno:
        line = err.lineno - 1 + line_offset
        col = max((err.offset or 1) - 1, 0)
        end_line = (err.end_lineno - 1 + line_offset) if err.end_lineno else line
        end_col = max((err.end_offset or 0) - 1, col + 1) if err.end_lineno == err.lineno else col + 1
        if end_line != line:
            end_line, end_col = line, max(len(lines[line]) if 0 <= line < len(lines) else col + 1, col + 1)
        message = f"syntax error: {err.msg}"
        rng = make_range(line, col, end_line, end_col)
    else:
        message = f"cannot parse the file: {type(err).__name__}: {err}".rstrip(": ")
        if isinstance(err, (RecursionError, MemoryError)):
            message = "cannot parse the file: expressions nested too deeply"
        rng = line_range(lines, line_offset if lines else 0)
    return {"range": rng, "severity": "error", "message": message, "source": "python"}


def parse_tree(text: str) -> ast.Module:
    """``ast.parse`` that turns every parser failure into a ``SyntaxError``-like exception."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise
    except Exception as err:  # pragma: no cover - defensive: the parser has odd failure modes
        raise ValueError(str(err)) from err


_TOP_DECORATOR = re.compile(r"^@")
_TOP_STATEMENT = re.compile(r"^[A-Za-z_@]")


def split_chunks(lines: list[str]) -> list[tuple[int, int]]:
    """Split a file into top-level statement groups: each decorated def/class starts a chunk."""
    starts = [0]
    prev_decorator = False
    for i, text in enumerate(lines):
        if _TOP_DECORATOR.match(text):
            if not prev_decorator and i:
                starts.append(i)
            prev_decorator = True
        elif _TOP_STATEMENT.match(text):
            if not prev_decorator and (text.startswith("def ") or text.startswith("class ")) and i:
                starts.append(i)
            prev_decorator = False
    starts = sorted(set(starts))
    return [(s, e - 1) for s, e in zip(starts, starts[1:] + [len(lines)])]


def parse_chunks(text: str, lines: list[str]) -> tuple[list[tuple[ast.Module, int]], list[dict]]:
    """Parse the file, or each chunk of it when the whole does not parse.

    Returns ``[(tree, line_offset)]`` and the syntax-error diagnostics.
    """
    try:
        return [(parse_tree(text), 0)], []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        whole_error = syntax_error_dict(err, lines)
    trees, errors = [], []
    for start, end in split_chunks(lines):
        chunk = "\n".join(lines[start:end + 1])
        try:
            trees.append((parse_tree(chunk), start))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
            errors.append(syntax_error_dict(err, lines, start))
    if not errors:
        errors.append(whole_error)
    return trees, errors


# --------------------------------------------------------------------------- helpers


def dotted_name(node: ast.AST) -> str | None:
    """``T.axis.remap`` for an Attribute chain rooted at a Name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def literal_value(node: ast.AST, constants: dict) -> Any:
    """Value of a literal expression (numbers, strings, tuples, + - * // of those and constants).

    Raises ``ValueError`` when the expression is not such a literal.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [literal_value(e, constants) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal_value(node.operand, constants)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = literal_value(node.left, constants), literal_value(node.right, constants)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
            return _arith(node.op, left, right)
    raise ValueError("not a literal")


def _arith(op: ast.operator, left: float, right: float) -> float:
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, ast.FloorDiv) and right:
        return left // right
    if isinstance(op, ast.Mod) and right:
        return left % right
    if isinstance(op, ast.Pow) and abs(right) <= 64:
        return left ** right
    raise ValueError("not a literal")


def value_or_text(node: ast.AST, constants: dict) -> Any:
    """A literal's value, else its source text (for symbolic extents such as ``n``)."""
    try:
        return literal_value(node, constants)
    except (ValueError, RecursionError):
        try:
            return ast.unparse(node)
        except Exception:  # pragma: no cover
            return "?"


def module_constants(tree: ast.Module) -> dict:
    """Top-level ``NAME = literal`` assignments, in order (later ones may use earlier ones)."""
    constants: dict = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                constants[stmt.targets[0].id] = literal_value(stmt.value, constants)
            except (ValueError, RecursionError):
                constants.pop(stmt.targets[0].id, None)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            try:
                constants[stmt.target.id] = literal_value(stmt.value, constants)
            except (ValueError, RecursionError):
                pass
    return constants


def namespace_aliases(tree: ast.Module) -> dict:
    """Names the file binds to TVMScript namespaces: ``{"T": "T", "Tx": "T", ...}``."""
    aliases = dict(DEFAULT_ALIASES)
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in ("tvm.script", "tvm.script.parser"):
            for alias in stmt.names:
                if alias.name in NAMESPACE_MODULES:
                    aliases[alias.asname or alias.name] = NAMESPACE_MODULES[alias.name]
    return aliases


def decorator_kind(decorator: ast.AST, aliases: dict) -> str | None:
    """``prim_func`` / ``ir_module`` / ``relax_function`` / ``macro`` for a TVMScript decorator."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = dotted_name(target)
    if not name or "." not in name:
        return None
    root, attr = name.split(".", 1)
    namespace = aliases.get(root)
    if namespace == "T" and attr == "prim_func":
        return "prim_func"
    if namespace == "I" and attr == "ir_module":
        return "ir_module"
    if namespace == "R" and attr == "function":
        return "relax_function"
    if namespace in ("T", "R") and attr == "macro":
        return "macro"
    return None


def unit_kind(node: ast.AST, aliases: dict) -> str:
    kinds = [decorator_kind(d, aliases) for d in getattr(node, "decorator_list", [])]
    for kind in ("ir_module", "prim_func", "relax_function", "macro"):
        if kind in kinds:
            return kind
    return "unknown"


# --------------------------------------------------------------------------- functions


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
        for stmt in body:
            if isinstance(stmt, ast.With) and self._is_nested_block(stmt):
                continue
            if isinstance(stmt, ast.With) and self._is_init(stmt):
                self._stores(stmt.body, count_ops=False)
                continue
            self._axis(stmt)
            self._explicit_access(stmt)
            self._stores([stmt], count_ops=True)

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

    def _explicit_access(self, stmt: ast.stmt) -> None:
        if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
            return
        name = (dotted_name(stmt.value.func) or "").split(".")[-1]
        if name not in ("reads", "writes"):
            return
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


# --------------------------------------------------------------------------- file level


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
    unit.problems = check_unit(node, ctx.aliases, ctx.constants, ctx.lines, ctx.line_offset)
    return unit, functions


_CHUNK_CACHE: "OrderedDict[str, _ChunkResult]" = OrderedDict()
_CHUNK_CACHE_SIZE = 4096


@dataclass
class _ChunkResult:
    """Outline of one top-level chunk, with ranges as if the chunk started at line 0."""
    units: list[Unit]
    functions: list[Function]
    constants: dict
    aliases: dict
    errors: list[dict]
    placed: tuple | None = None  # (start line, units, functions, errors) of the last placement

    def at(self, start: int) -> tuple[list[Unit], list[Function], list[dict]]:
        """The chunk's outline moved to ``start``; the last placement is reused (shared, read-only)."""
        if self.placed is None or self.placed[0] != start:
            self.placed = (start, _shifted(self.units, start), _shifted(self.functions, start),
                           _shifted(self.errors, start))
        return self.placed[1:]


def _outline_trees(trees: list[tuple[ast.Module, int]], lines: list[str], constants: dict,
                   aliases: dict) -> tuple[list[Unit], list[Function]]:
    units, functions = [], []
    for tree, offset in trees:
        ctx = _Context(lines, offset, constants, aliases)
        for stmt in tree.body:
            found = _unit(stmt, ctx)
            if found:
                units.append(found[0])
                functions.extend(found[1])
    return units, functions


def _chunk_result(chunk: str, constants: dict, aliases: dict) -> _ChunkResult:
    """Outline one chunk (cached by its text and the constants/aliases it can see)."""
    key = repr((chunk, sorted(constants.items()), sorted(aliases.items())))
    cached = _CHUNK_CACHE.get(key)
    if cached is not None:
        _CHUNK_CACHE.move_to_end(key)
        return cached
    lines = chunk.splitlines()
    try:
        tree, errors = parse_tree(chunk), []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        tree, errors = None, [syntax_error_dict(err, lines)]
    own_constants = module_constants(tree) if tree else {}
    own_aliases = namespace_aliases(tree) if tree else {}
    units, functions = _outline_trees([(tree, 0)] if tree else [], lines, {**constants, **own_constants},
                                      {**aliases, **own_aliases})
    result = _ChunkResult(units, functions, own_constants, own_aliases, errors)
    _CHUNK_CACHE[key] = result
    if len(_CHUNK_CACHE) > _CHUNK_CACHE_SIZE:
        _CHUNK_CACHE.popitem(last=False)
    return result


def _shifted(value: Any, delta: int) -> Any:
    """A copy of outline data with every range moved down by ``delta`` lines."""
    if isinstance(value, dict):
        if "start" in value and "end" in value and "line" in value["start"]:
            return make_range(value["start"]["line"] + delta, value["start"]["character"],
                              value["end"]["line"] + delta, value["end"]["character"])
        return {k: _shifted(v, delta) for k, v in value.items()}
    if isinstance(value, list):
        return [_shifted(v, delta) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        copy = object.__new__(type(value))
        for name in value.__dataclass_fields__:
            field_value = getattr(value, name)
            if name in ("start_line", "end_line"):
                field_value += delta
            elif isinstance(field_value, (dict, list)) or hasattr(field_value, "__dataclass_fields__"):
                field_value = _shifted(field_value, delta)
            setattr(copy, name, field_value)
        return copy
    return value


def _outline_whole(text: str, lines: list[str], outline: Outline) -> None:
    """Fallback when chunking went wrong: parse the whole file (or per chunk, uncached)."""
    trees, outline.syntax_errors = parse_chunks(text, lines)
    outline.constants, outline.aliases = {}, dict(DEFAULT_ALIASES)
    for tree, _ in trees:
        outline.constants.update(module_constants(tree))
        outline.aliases.update(namespace_aliases(tree))
    outline.units, outline.functions = _outline_trees(trees, lines, outline.constants, outline.aliases)


def build_outline(text: str | bytes, path: str = "<text>") -> Outline:
    """Outline of a TVMScript file; never raises on bad input (problems go to ``syntax_errors``).

    The file is split into top-level chunks (one per decorated def/class); each chunk's outline is
    cached by its text, so re-outlining after an edit only re-parses the chunk that changed.  The
    returned units and functions may be shared with later calls: treat them as read-only.
    """
    text = decode_source(text)
    lines = text.splitlines()
    outline = Outline(path)
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        outline.syntax_errors.append({
            "range": line_range(lines, 0), "severity": "error", "source": "asight",
            "message": f"file too large to analyse ({len(text) / 1e6:.1f} MB > {MAX_FILE_BYTES / 1e6:.1f} MB)"})
        return outline
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n")
        outline.syntax_errors.append({"range": line_range(lines, line), "severity": "error", "source": "python",
                                      "message": "syntax error: the file contains NUL bytes (is it a binary file?)"})
        return outline
    results = []
    for start, end in split_chunks(lines):
        result = _chunk_result("\n".join(lines[start:end + 1]), outline.constants, outline.aliases)
        outline.constants = {**outline.constants, **result.constants}
        outline.aliases = {**outline.aliases, **result.aliases}
        results.append((start, result))
    if any(r.errors for _, r in results):
        try:
            parse_tree(text)
            _outline_whole(text, lines, outline)  # the file is fine: the chunk split was wrong
            return outline
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    for start, result in results:
        units, functions, errors = result.at(start)
        outline.units.extend(units)
        outline.functions.extend(functions)
        outline.syntax_errors.extend(errors)
    return outline


def function_text(text: str, fn: Function) -> str:
    """The source lines of one function (for per-function source hashes)."""
    lines = text.splitlines()
    return "\n".join(lines[fn.range["start"]["line"]:fn.range["end"]["line"] + 1])
