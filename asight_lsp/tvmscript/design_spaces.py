"""Design spaces written by the user, recognised statically (stdlib ``ast``; never executed here).

A *space function* is a top-level ``def f(sch, ...)`` (not a TVMScript unit) that calls one of
MetaSchedule's sampling methods on its first parameter (``sch.sample_perfect_tile``,
``sch.sample_categorical``, ``sch.sample_compute_location``, ``sch.sample_partitioned_tile``).
For each one we report its name, ranges and every sampling call site with what it samples, where
the text says so literally (``block = sch.get_sblock("C"); i, j, k = sch.get_loops(block)`` makes
``sample_perfect_tile(i, ...)`` a site on loop 0 of block ``C``).

Running the function is the tuning job's business (``worker/userspace.py``), on explicit command
only; see docs/spaces.md.
"""
from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field

from .ranges import node_range
from .hashing import source_hash
from .model import Outline
from .outline import build_outline
from .pysource import parse_chunks, source_lines

# Schedule method -> the trace instruction kind it records.
SAMPLING_METHODS = {
    "sample_perfect_tile": "SamplePerfectTile",
    "sample_partitioned_tile": "SamplePartitionedTile",
    "sample_categorical": "SampleCategorical",
    "sample_compute_location": "SampleComputeLocation",
}
BLOCK_GETTERS = ("get_sblock", "get_block")
SPACE_MODES = ("alone", "union")


@dataclass
class SampleSite:
    """One ``sch.sample_*(...)`` call in a space function."""
    line: int                  # 0-based line of the call
    range: dict                # LSP range of the call expression
    method: str                # sample_perfect_tile | ...
    kind: str                  # trace instruction kind (SamplePerfectTile | ...)
    target: str | None = None  # the loop/block argument as written (``i``, ``"C"``)
    block: str | None = None   # block name when the argument resolves to a literal block
    loop_index: int | None = None  # position of the loop in ``get_loops(block)``
    results: list = field(default_factory=list)  # names the call's results are assigned to
    in_loop: bool = False      # inside a for/while: one site may record several instructions

    def label(self) -> str:
        """``sample_perfect_tile(i of C)`` — what the site samples, for hovers."""
        where = self.target or ""
        if self.block and self.loop_index is not None:
            where = f"{self.target} (loop {self.loop_index} of block {self.block})"
        elif self.block:
            where = f"block {self.block}"
        return f"{self.method}({where})"


@dataclass
class SpaceFunction:
    name: str
    param: str                 # the schedule parameter's name
    range: dict                # whole def (decorators included)
    name_range: dict           # the def's name
    line: int                  # 0-based line of ``def``
    sites: list = field(default_factory=list)   # [SampleSite] in source order
    blocks: list = field(default_factory=list)  # literal block names it asks for

    def to_dict(self) -> dict:
        return asdict(self)


CONTEXT_NODES = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef)


def module_context(tree: ast.Module, unit_lines: set) -> ast.Module:
    """The statements of a file that define a space function's environment: its imports,
    assignments and plain ``def``/``class`` statements, not the TVMScript units (0-based first lines
    ``unit_lines``) nor other top-level code.  The tuning job executes exactly these."""
    kept = [node for node in tree.body
            if isinstance(node, CONTEXT_NODES) and _first_line(node) not in unit_lines]
    return ast.Module(body=kept, type_ignores=[])


def space_hash(text: str, space: "SpaceFunction", outline: Outline | None = None) -> str:
    """What a space run is keyed by (resume, staleness): the function's text and, when the file
    parses, everything the tuning job executes with it (imports, constants, helpers; formatting and
    comments aside), so editing ``UNROLL_STEPS = [...]`` makes a new space, not a resumed one."""
    lines = source_lines(text)
    body = "\n".join(lines[space.range["start"]["line"]:space.range["end"]["line"] + 1])
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return source_hash(body)
    unit_lines = {u.start_line for u in (outline or build_outline(text)).units}
    return source_hash(body + "\n" + ast.unparse(module_context(tree, unit_lines)))


def find_spaces(text: str, path: str = "<text>", outline: Outline | None = None) -> list[SpaceFunction]:
    """Every space function of a file (chunks that do not parse are skipped)."""
    lines = source_lines(text)
    outline = outline or build_outline(text, path)
    unit_lines = {u.start_line for u in outline.units}
    trees, _errors = parse_chunks(text, lines)
    found = []
    for tree, offset in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and _first_line(node) + offset not in unit_lines:
                space = _space_function(node, lines, offset)
                if space is not None:
                    found.append(space)
    return found


def space_by_name(spaces: list[SpaceFunction], name: str) -> SpaceFunction | None:
    return next((s for s in spaces if s.name == name), None)


def _first_line(node: ast.stmt) -> int:
    """0-based first line of a statement, its decorators included (where a unit starts)."""
    decorators = getattr(node, "decorator_list", None) or [node]
    return decorators[0].lineno - 1


def _space_function(node: ast.FunctionDef, lines: list[str], offset: int) -> SpaceFunction | None:
    args = node.args.posonlyargs + node.args.args
    if not args:
        return None
    param = args[0].arg
    scan = _Scanner(param, lines, offset)
    for stmt in node.body:
        scan.visit(stmt)
    if not scan.sites:
        return None
    whole = node_range(node, lines, offset)
    whole["start"] = {"line": _first_line(node) + offset, "character": 0}
    name_line = node.lineno - 1 + offset
    name_col = lines[name_line].find(node.name) if name_line < len(lines) else 0
    name_range = {"start": {"line": name_line, "character": max(name_col, 0)},
                  "end": {"line": name_line, "character": max(name_col, 0) + len(node.name)}}
    return SpaceFunction(node.name, param, whole, name_range, node.lineno - 1 + offset, scan.sites,
                         list(dict.fromkeys(scan.blocks)))


class _Scanner(ast.NodeVisitor):
    """Collects sampling calls on the schedule parameter and literal block/loop bindings."""

    def __init__(self, param: str, lines: list[str], offset: int):
        self.param, self.lines, self.offset = param, lines, offset
        self.block_vars: dict[str, str] = {}          # var -> block name
        self.loop_vars: dict[str, tuple[str, int]] = {}  # var -> (block name, loop index)
        self.sites: list[SampleSite] = []
        self.blocks: list[str] = []
        self.loop_depth = 0

    def _method(self, node: ast.AST) -> str | None:
        """``name`` when node is ``<param>.name(...)``."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == self.param):
            return node.func.attr
        return None

    def visit_For(self, node: ast.For) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_While = visit_For

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)   # the call itself first (a site records its results below)
        method = self._method(node.value)
        names = [_names(t) for t in node.targets]
        flat = [n for group in names for n in group]
        if method in BLOCK_GETTERS:
            name = _literal_str(_arg(node.value, 0, "name"))
            if name is not None:
                for var in flat:
                    self.block_vars[var] = name
        elif method == "get_loops":
            block = self._block_of(_arg(node.value, 0, "block"))
            if block is not None and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
                for index, var in enumerate(names[0]):
                    self.loop_vars[var] = (block, index)
        elif method in SAMPLING_METHODS and self.sites and self.sites[-1].range == self._range(node.value):
            self.sites[-1].results = flat

    def visit_Call(self, node: ast.Call) -> None:
        method = self._method(node)
        if method in BLOCK_GETTERS:
            name = _literal_str(_arg(node, 0, "name"))
            if name is not None:
                self.blocks.append(name)
        if method in SAMPLING_METHODS:
            self.sites.append(self._site(node, method))
        self.generic_visit(node)

    def _site(self, node: ast.Call, method: str) -> SampleSite:
        key = "block" if method == "sample_compute_location" else "loop"
        target = _arg(node, 0, key) if method != "sample_categorical" else None
        site = SampleSite(node.lineno - 1 + self.offset, self._range(node), method, SAMPLING_METHODS[method],
                          in_loop=self.loop_depth > 0)
        if target is not None:
            site.target = ast.unparse(target)
            if isinstance(target, ast.Name) and target.id in self.loop_vars:
                site.block, site.loop_index = self.loop_vars[target.id]
            else:
                site.block = self._block_of(target)
        return site

    def _block_of(self, node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Name):
            return self.block_vars.get(node.id)
        literal = _literal_str(node)
        if literal is not None:
            return literal
        if node is not None and self._method(node) in BLOCK_GETTERS:
            return _literal_str(_arg(node, 0, "name"))
        return None

    def _range(self, node: ast.AST) -> dict:
        return node_range(node, self.lines, self.offset)


def _arg(call: ast.Call, index: int, keyword: str) -> ast.AST | None:
    if len(call.args) > index:
        return call.args[index]
    return next((kw.value for kw in call.keywords if kw.arg == keyword), None)


def _literal_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _names(elt)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


# --------------------------------------------------------------------------- which PrimFunc


def function_for_space(outline: Outline, space: SpaceFunction) -> str | None:
    """The id of the one PrimFunc a space applies to: the file's only one, or the only one whose
    blocks include every block the space names.  None when that is not decidable."""
    prims = [f for f in outline.functions if f.kind == "prim_func"]
    if len(prims) == 1:
        return prims[0].id
    if not space.blocks:
        return None
    wanted = set(space.blocks)
    matching = [f for f in prims if wanted <= {b.name for b in f.blocks}]
    return matching[0].id if len(matching) == 1 else None


def site_at(spaces: list[SpaceFunction], line: int, character: int) -> tuple[SpaceFunction, SampleSite] | None:
    """The sampling call under a position."""
    for space in spaces:
        for site in space.sites:
            start, end = site.range["start"], site.range["end"]
            if (start["line"], start["character"]) <= (line, character) <= (end["line"], end["character"]):
                return space, site
    return None
