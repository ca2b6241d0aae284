"""Python source as the outline reads it (standard library ``ast`` only, nothing executed): decoding,
syntax errors as diagnostics, chunks of half-typed files, literal constants, TVMScript namespace
aliases and decorators."""
from __future__ import annotations

import ast
import operator
import re
from typing import Any

from .namespaces import decorator_of, import_namespace
from .printed import METADATA, metadata_section, type_var_names
from .ranges import line_range, make_range


MAX_FILE_BYTES = 4 * 1024 * 1024


def read_bounded(path: str) -> bytes:
    """A source file's bytes, at most ``MAX_FILE_BYTES + 1`` of them (more is "too large" anyway).

    Only a regular file is read: a symlink to /dev/zero or /dev/urandom was read without end (22 GB,
    OOM-killed), a FIFO blocked ``open`` for good, and a 3 GB sparse file was read whole before the
    limit applied.  The FIFO is opened non-blocking so that ``open`` itself returns; raises
    ``IsADirectoryError`` / ``ValueError`` (not a regular file) / ``OSError``."""
    import os
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            raise ValueError("not a regular file (a device, FIFO or socket)")
        return handle.read(MAX_FILE_BYTES + 1)

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LINE_END = re.compile(r"\r\n|\r|\n")
_OTHER_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of a source text as Python's tokenizer and the editor count them: only ``\\n``,
    ``\\r\\n`` and ``\\r`` end a line (VS Code's model too).  ``str.splitlines`` also ends one at
    ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``: a comment holding one
    would show the gate other lines than Python parses and the worker slices (issue 22).  Every
    reader of a file's text (gate, outline, worker, LSP ranges) splits it here; otherwise as
    ``splitlines`` (no empty last line after a final line end)."""
    if not any(char in text for char in _OTHER_BREAKS):   # 6 us for 3,700 lines; a regex: 1.8 ms
        return text.splitlines(keepends)
    if keepends:
        return _LINE.findall(text)
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def line_text(line: str) -> str:
    """One line of ``source_lines(text, keepends=True)`` without its line end."""
    return line.rstrip("\r\n")


def decode_source(data: bytes | str) -> str:
    """Text of a file; undecodable bytes become U+FFFD rather than an exception."""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


def fold_refusals(refused: list[tuple[int, str]], lines: list[str], line_offset: int = 0) -> list[dict]:
    """Diagnostic dicts (warnings) for ``module_constants``' refused constants, at their lines."""
    return [{"range": line_range(lines, line + line_offset), "severity": "warning", "message": why,
             "source": "asight"} for line, why in refused]


def syntax_error_dict(err: BaseException, lines: list[str], line_offset: int = 0) -> dict:
    """A diagnostic dict for a ``SyntaxError`` (or the errors ``ast.parse`` raises on garbage)."""
    if isinstance(err, SyntaxError) and err.lineno:
        line = err.lineno - 1 + line_offset
        col = max((err.offset or 1) - 1, 0)
        end_line = (err.end_lineno - 1 + line_offset) if err.end_lineno else line
        end_col = max((err.end_offset or 0) - 1, col + 1) if err.end_lineno == err.lineno else col + 1
        if end_line != line:
            end_line, end_col = line, max(len(lines[line]) if 0 <= line < len(lines) else col + 1, col + 1)
        message = f"syntax error: {lines_moved(err.msg, line_offset)}"
        rng = make_range(line, col, end_line, end_col)
    else:
        message = f"cannot parse the file: {type(err).__name__}: {err}".rstrip(": ")
        if isinstance(err, (RecursionError, MemoryError)):
            message = "cannot parse the file: expressions nested too deeply"
        rng = line_range(lines, line_offset if lines else 0)
    return {"range": rng, "severity": "error", "message": message, "source": "python"}


_LINE_IN_MESSAGE = re.compile(r"\b(line )(\d+)")


def lines_moved(message: str, delta: int) -> str:
    """A syntax error's message with the lines it names ("on line 2", "(detected at line 9)") moved
    by ``delta``: Python counts the lines of the piece it parsed (a chunk, a method), the file does
    not start there, and a cached piece moves when lines above it come and go."""
    if not delta:
        return message
    return _LINE_IN_MESSAGE.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + delta}", message)


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
        if not text or text[0] in " \t#":
            continue   # most lines: indented, blank or comments (the regexes below match none)
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
    """Value of a literal expression (numbers, strings, tuples, dicts, + - * // of those and constants,
    an index or key of a literal: ``CONFIG["n"]``).

    Raises ``ValueError`` when the expression is not such a literal.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return _bounded(node.value)
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [literal_value(e, constants) for e in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = [literal_value(k, constants) for k in node.keys]
        if not all(isinstance(k, (int, float, str, bool)) or k is None for k in keys):
            raise ValueError("not a literal")
        return dict(zip(keys, [literal_value(v, constants) for v in node.values]))
    if isinstance(node, ast.Subscript):
        return _index(literal_value(node.value, constants), node.slice, constants)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal_value(node.operand, constants)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = literal_value(node.left, constants), literal_value(node.right, constants)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
            return _arith(node.op, left, right)
        return _sequence_arith(node.op, left, right)
    raise ValueError("not a literal")


def _index(value: Any, index: ast.AST, constants: dict) -> Any:
    """``value[index]`` of a literal container (a key, a position or a slice of literals)."""
    if isinstance(index, ast.Slice):
        bounds = [None if b is None else literal_value(b, constants) for b in (index.lower, index.upper, index.step)]
        if not all(b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in bounds) or bounds[2] == 0:
            raise ValueError("not a literal")
        key: Any = slice(*bounds)
    else:
        key = literal_value(index, constants)
    if not isinstance(value, (dict, list, str)) or isinstance(key, (list, dict)):
        raise ValueError("not a literal")
    try:
        return value[key]
    except (KeyError, IndexError, TypeError):
        raise ValueError("not a literal") from None


MAX_FOLD_BITS = 4096     # the largest integer the static reader folds (a tensor's extent needs < 64 bits)
MAX_FOLD_ITEMS = 1 << 16  # the longest string or list the static reader builds from ``*`` and ``+``


class FoldRefused(ValueError):
    """Arithmetic of literals the static reader does not fold: a number past ``MAX_FOLD_BITS``, a
    float that overflows, a division by zero.  Its message says why, for a diagnostic at its line.
    The gate refuses the same arithmetic (``expr_rules``): TVM's parser would compute it in Python."""


def _bounded(value: Any) -> Any:
    """A literal as it is, unless it is an integer past ``MAX_FOLD_BITS`` (``0x`` and 5,000 digits)."""
    if isinstance(value, int) and value.bit_length() > MAX_FOLD_BITS:
        raise FoldRefused(f"too large to analyse: this number has {value.bit_length():,} bits, more than the "
                          f"{MAX_FOLD_BITS} the static reader reads")
    return value


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
              ast.BitOr: operator.or_, ast.BitXor: operator.xor}


def _arith(op: ast.operator, left: float, right: float) -> float:
    """``left op right`` of two numbers, refused (``FoldRefused``) when the result would be larger than
    ``MAX_FOLD_BITS`` bits or Python would raise (overflow, zero division, a negative shift): a
    number's size is judged before it is computed, so no literal makes the reader compute for long."""
    compute = _OPERATORS.get(type(op))
    if compute is None:
        raise ValueError("not a literal")
    _require_foldable(op, left, right)
    try:
        return compute(left, right)
    except (ArithmeticError, ValueError, TypeError) as err:   # 0 ** -1, 1e300 ** 2, 1 << -1, 1.5 & 2
        raise FoldRefused(f"cannot fold this constant: {type(err).__name__}: {err}") from None


def _require_foldable(op: ast.operator, left: float, right: float) -> None:
    """``FoldRefused`` when ``left op right`` (integers) would have more than ``MAX_FOLD_BITS`` bits."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    size = left.bit_length()
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        bits = size * right
    elif isinstance(op, ast.Mult):
        bits = size + right.bit_length()
    elif isinstance(op, ast.LShift):
        bits = size + max(right, 0)
    else:
        bits = max(size, right.bit_length())
    if bits > MAX_FOLD_BITS:
        raise FoldRefused(f"too large to analyse: this constant has about {bits:,} bits, more than the "
                          f"{MAX_FOLD_BITS} the static reader folds")


def _sequence_arith(op: ast.operator, left: Any, right: Any) -> Any:
    """``"ab" * 3``, ``[0] * n``, ``"a" + "b"``: folded up to ``MAX_FOLD_ITEMS`` items, refused past it."""
    if isinstance(op, ast.Mult) and isinstance(left, int) and not isinstance(left, bool):
        left, right = right, left
    if isinstance(op, ast.Mult) and isinstance(left, (str, list)) and isinstance(right, int) \
            and not isinstance(right, bool):
        length = len(left) * max(right, 0)
    elif isinstance(op, ast.Add) and type(left) is type(right) and isinstance(left, (str, list)):
        length = len(left) + len(right)
    else:
        raise ValueError("not a literal")
    if length > MAX_FOLD_ITEMS:
        raise FoldRefused(f"too large to analyse: this constant would have {length:,} items, more than the "
                          f"{MAX_FOLD_ITEMS:,} the static reader builds")
    return left * right if isinstance(op, ast.Mult) else left + right


TVM_INT_BITS = 64   # TVM's widest integer (int64, uint64): a wider Python int never becomes IR


def fold_refusal(node: ast.AST, constants: dict) -> str | None:
    """Why TVM's parser must not be given ``node`` (a number or an operation of literals), when that is
    its own doing: too large to fold, or an integer wider than TVM's 64 bits (TVM answers that with
    "Expected `ir.Expr` but got `ffi.BigInt`"); ``None`` when it folds to a value TVM takes, is no
    literal, or one of its operands is already refused."""
    if isinstance(node, ast.BinOp) and any(_refusal_of(operand, constants) for operand in (node.left, node.right)):
        return None
    return _refusal_of(node, constants)


def _refusal_of(node: ast.AST, constants: dict) -> str | None:
    try:
        value = literal_value(node, constants)
    except FoldRefused as err:
        return str(err)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > TVM_INT_BITS:
        return (f"this number has {value.bit_length()} bits; TVM's integers have at most {TVM_INT_BITS} "
                f"(int64, uint64)")
    return None


def value_or_text(node: ast.AST, constants: dict) -> Any:
    """A literal's value, else its source text (for symbolic extents such as ``n``)."""
    try:
        return literal_value(node, constants)
    except (ValueError, RecursionError):
        try:
            return ast.unparse(node)
        except Exception:  # pragma: no cover
            return "?"


def module_constants(tree: ast.Module, known: dict | None = None, refused: list | None = None) -> dict:
    """Top-level assignments of literals, in order (later ones may use earlier ones, and ``known``:
    the constants of the file's earlier chunks): ``N = 16``, ``M, N = 16, 32``, ``N = CONFIG["n"]``
    for a literal dict ``CONFIG``.  A name assigned anything else is no constant from there on.  Only
    values that reach the worker unchanged (JSON: no dict with other than string keys) are kept.
    ``refused`` gets ``(line in the tree, why)`` of each assignment whose arithmetic is not folded
    (``FoldRefused``): the name is no constant, and the editor says why at that line."""
    seen, assigned = dict(known or {}), {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            pairs = [(target, stmt.value) for target in stmt.targets]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            pairs = [(stmt.target, stmt.value)]
        else:
            for target in _rebound(stmt):
                for name in _stored_names(target):
                    seen.pop(name, None)
                    assigned[name] = False
            continue
        for target, value in pairs:
            try:
                found = _unpack(target, literal_value(value, seen))
            except (ValueError, RecursionError) as err:
                if isinstance(err, FoldRefused) and refused is not None:
                    refused.append((stmt.lineno - 1, str(err)))
                found = dict.fromkeys(_stored_names(target))
                for name in found:
                    seen.pop(name, None)
                assigned.update(dict.fromkeys(found, False))
                continue
            seen.update(found)
            assigned.update(dict.fromkeys(found, True))
    return {name: seen[name] for name, literal in assigned.items() if literal and _exact_in_json(seen[name])}


def _rebound(stmt: ast.stmt) -> list[ast.AST]:
    """Targets a module-level statement other than an assignment stores into."""
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
        return [stmt.target]
    if isinstance(stmt, ast.With):
        return [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    return []


def _stored_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _stored_names(element)]
    if isinstance(target, ast.Starred):
        return _stored_names(target.value)
    return []


def _unpack(target: ast.AST, value: Any) -> dict:
    """``{name: value}`` of a literal assigned to a name or a tuple of names (as Python unpacks it)."""
    if isinstance(target, ast.Name):
        return {target.id: value}
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (list, str)) and \
            len(target.elts) == len(value) and not any(isinstance(e, ast.Starred) for e in target.elts):
        found: dict = {}
        for element, item in zip(target.elts, value):
            found.update(_unpack(element, item))
        return found
    raise ValueError("not a literal")


def _exact_in_json(value: Any) -> bool:
    if isinstance(value, list):
        return all(_exact_in_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _exact_in_json(v) for k, v in value.items())
    return True


def namespace_aliases(tree: ast.Module, line_offset: int = 0) -> dict:
    """What this tree's module-level names stand for in TVMScript: ``{"Tx": "T", "n": "TypeVar",
    "metadata": "metadata:<digest>", ...}``; the outline starts from ``model.DEFAULT_ALIASES``."""
    aliases: dict = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            for alias in stmt.names:
                namespace = import_namespace(stmt.module, alias.name)
                if namespace:
                    aliases[alias.asname or alias.name] = namespace
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                module, _, name = alias.name.rpartition(".")
                namespace = import_namespace(module, name) if alias.asname else None
                if namespace:
                    aliases[alias.asname] = namespace
    for name in type_var_names(tree):
        aliases[name] = "TypeVar"
    section = metadata_section(tree, line_offset)
    if section is not None:
        aliases[METADATA] = section.code if section.problem is None else f"metadata!{section.problem}"
    return aliases


def decorator_kind(decorator: ast.AST, aliases: dict) -> str | None:
    """``prim_func`` / ``ir_module`` / ``relax_function`` / ``macro`` / ``inline`` / ``jit`` / ``pyfunc``
    for a decorator spelled as TVM accepts it (``T.prim_func``, ``@tvm.script.ir_module`` ...)."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = dotted_name(target)
    if not name or "." not in name:
        return None
    root, attr = name.split(".", 1)
    namespace = aliases.get(root)
    if namespace in ("T", "R", "I", "Tx"):
        return decorator_of(f"{namespace}.{attr}")
    return decorator_of(name) if root not in aliases else None


def unit_kind(node: ast.AST, aliases: dict) -> str:
    """What TVM parses a top-level def/class as: a class with an ``ir_module`` decorator; a function
    by its last decorator (the one TVM dispatches on)."""
    decorators = getattr(node, "decorator_list", [])
    if isinstance(node, ast.ClassDef):
        return "ir_module" if any(decorator_kind(d, aliases) == "ir_module" for d in decorators) else "unknown"
    kind = decorator_kind(decorators[-1], aliases) if decorators else None
    return kind if kind in ("prim_func", "relax_function", "macro") else "unknown"


def decorator_keyword(node: ast.AST, keyword: str, default=None):
    """The literal value of ``keyword=`` in the unit's TVMScript decorator (``check_well_formed``)."""
    for decorator in getattr(node, "decorator_list", []):
        if isinstance(decorator, ast.Call):
            for item in decorator.keywords:
                if item.arg == keyword and isinstance(item.value, ast.Constant):
                    return item.value.value
    return default
