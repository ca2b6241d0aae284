"""An ``@I.ir_module`` class read member by member, so that an edit re-reads one method, not the
whole module (a model as TVM prints it is one class of thousands of lines; parsing, outlining and
gating all of it took 240 ms a keystroke at 3,000 lines).

``split_class`` cuts the class's lines into its header (decorators, the ``class`` line and the
statements before the first method) and its members (a method, its decorators first, and the
class-level statements after it).  Each member is parsed alone, where it stands (inside an
``if True:`` block: its indentation, columns and text are the file's); its functions and gate
findings are cached by its text (in the document's ``ChunkCache``), and the class's unit is put
together from them: the same ``Unit``, functions and verdict as the whole class parsed at once
(``bench/members_corpus.py`` checks it on the classes of TVM's tests, ``tests/unit/test_members.py``
on the fixtures and hostile payloads).  A class that cannot be cut safely (code less indented than
its methods; a triple-quoted string or a backslash continuation: a line inside one may look like a
method's start; two half-typed methods: maybe a bracket across them; one method only) is parsed
whole, as before.  A half-typed method's syntax error is Python's on that method alone: the same
line as in the whole class, or the next, and sometimes another message.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from .model import Function, Unit
from .moves import moved_errors, shifted as _shifted
from .pysource import parse_tree, syntax_error_dict, unit_kind
from .ranges import make_range
from .safety import ClassContext, MemberVerdict, class_verdict, gate_member, still_holds
from .scanner import _Context, _function
from .scope import names_bound_anywhere


@dataclass(frozen=True)
class ClassSplit:
    class_line: int                 # file line of the ``class`` keyword
    header: tuple[int, int]         # first and last file line of the header
    indent: str                     # the methods' indentation
    members: tuple[tuple[int, int], ...]


_CLASS_LINE = re.compile(r"^class [^\n]*", re.M)
_FIRST_CODE = re.compile(r"\n([ \t]*)[^\s#]")
_BY_INDENT: dict[str, tuple[re.Pattern, re.Pattern]] = {}


def _indent_patterns(indent: str) -> tuple[re.Pattern, re.Pattern]:
    """Code less indented than ``indent``; lines at exactly ``indent`` (a method's, or a class statement's)."""
    if indent not in _BY_INDENT:
        escaped = re.escape(indent)
        _BY_INDENT[indent] = (re.compile(rf"\n(?!{escaped})[ \t]*[^\s#]"), re.compile(rf"\n{escaped}(@|def |[^\s])"))
    return _BY_INDENT[indent]


def split_class(lines: list[str], start: int, end: int, chunk: str | None = None) -> ClassSplit | None:
    """The class in file lines ``start..end`` (a top-level chunk, ``chunk`` its text) cut into header
    and members, or None when it cannot be cut safely or has fewer than two methods.  Regular
    expressions over the text (each starting at a newline: a literal the engine skips to), not a
    loop over its lines: this runs on every edit of the class."""
    chunk = "\n".join(lines[start:end + 1]) if chunk is None else chunk
    if '"""' in chunk or "'''" in chunk or "\\\n" in chunk or chunk.endswith("\\"):
        return None   # a string or statement spanning lines could be cut at a line that looks like a method
    found = _CLASS_LINE.search(chunk)
    if found is None or not found.group().split("#", 1)[0].rstrip().endswith(":"):
        return None
    class_line = start + chunk.count("\n", 0, found.start())
    body = chunk[found.end():]   # from the newline that ends the class line
    first = _FIRST_CODE.search(body)
    if class_line - start > 60 or first is None or not first.group(1):
        return None   # no indented body
    indent = first.group(1)
    less_indented, at_indent = _indent_patterns(indent)
    if less_indented.search(body):
        return None   # code less indented than the methods: code after the class, a continuation
    starts, line, pos, after_decorator = [], class_line, 0, False
    for match in at_indent.finditer(body):
        line += body.count("\n", pos, match.start() + 1)
        pos = match.start() + 1
        head = match.group(1)
        if head == "@":
            if not after_decorator:
                starts.append(line)
            after_decorator = True
        else:
            if head == "def " and not after_decorator:
                starts.append(line)
            after_decorator = False
    if len(starts) < 2:
        return None
    spans = tuple((s, e - 1) for s, e in zip(starts, starts[1:] + [end + 1]))
    return ClassSplit(class_line, (start, starts[0] - 1), indent, spans)


def member_text(lines: list[str], span: tuple[int, int]) -> str:
    return "\n".join(lines[span[0]:span[1] + 1])


def parse_member(lines: list[str], span: tuple[int, int]) -> ast.Module:
    """A member's statements, parsed where they stand: inside an ``if True:`` block, so that its
    lines keep their indentation (columns are the file's, no walk to move them) and its text is the
    file's.  Line numbers count from ``span[0] - 1`` (``at_line``).  Raises ``SyntaxError``."""
    tree = parse_tree("if True:\n" + "\n".join(lines[span[0]:span[1] + 1]))
    return ast.Module(body=tree.body[0].body, type_ignores=[])


def at_line(start: int) -> int:
    """The line offset of a member parsed by ``parse_member`` from file line ``start``."""
    return start - 1


@dataclass
class MemberOutline:
    """One member, outlined at file line ``start`` with the class line at ``class_line``."""
    start: int
    end: int                # its last file line (trailing blank lines and comments included)
    class_line: int
    functions: list[Function]
    names: frozenset        # its methods' names
    bound: frozenset        # every name it binds (the unit's "bound anywhere")
    last: int               # file line where its last statement ends
    frame_before: tuple     # the class frame its verdict was computed in
    verdict: MemberVerdict | None = None
    errors: list | None = None

    def at(self, start: int, class_line: int) -> "MemberOutline":
        """This member moved to ``start`` (class line ``class_line``): a copy, or itself."""
        if start == self.start and class_line == self.class_line:
            return self
        delta, class_delta = start - self.start, class_line - self.class_line
        verdict = self.verdict and _moved_verdict(self.verdict, delta, class_delta)
        return replace(self, start=start, end=self.end + delta, class_line=class_line, functions=_shifted(self.functions, delta),
                       last=self.last + delta, verdict=verdict, errors=moved_errors(self.errors or [], delta))


def _moved_verdict(verdict: MemberVerdict, delta: int, class_delta: int) -> MemberVerdict:
    phases = tuple([replace(f, range=_shifted(f.range, class_delta if f.on_class_line else delta)) for f in phase]
                   for phase in verdict.phases)
    refs = tuple([(_shifted(r, class_delta if on_class else delta), in_params, on_class) for r, in_params, on_class in part]
                 for part in verdict.references)
    return MemberVerdict(phases, refs, verdict.frame, verdict.asked)


@dataclass
class ClassChunk:
    """What ``outline_class`` needs besides the member cache: the file, where the class is, what it sees."""
    lines: list[str]
    split: ClassSplit
    constants: dict
    aliases: dict
    context: str            # the chunk key's context (constants and aliases), for member keys


def outline_class(chunk: ClassChunk, cache) -> tuple[list[Unit], list[Function], list[dict], list] | None:
    """The class's unit and functions (or its syntax errors), put together from its members (cached
    in ``cache`` by their text), and the member keys it used; None: parse the class whole instead."""
    lines, split = chunk.lines, chunk.split
    header = _parse_header(lines, split)
    if header is None or unit_kind(header, chunk.aliases) != "ir_module":
        return None
    class_key = f"member\x00{chunk.context}\x00{header.name}\x00{lines[split.class_line]}"
    keys = [(member_text(lines, span), class_key) for span in split.members]
    found = [_member(chunk, header.name, span, key, cache) for span, key in zip(split.members, keys)]
    broken = [m for m in found if m.errors]
    if broken:
        if len(broken) > 1:
            return None   # the cut may be wrong (a bracket left open across members): parse it whole
        return [], [], [e for m in broken for e in m.errors], keys
    return (*_assemble(chunk, header, found, keys, cache), [], keys)


def _parse_header(lines: list[str], split: ClassSplit) -> ast.ClassDef | None:
    start, last = split.header
    try:
        tree = parse_tree("\n".join(lines[start:last + 1]) + "\n" + split.indent + "pass")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.ClassDef):
        return None
    return tree.body[0]


def _member(chunk: ClassChunk, name: str, span: tuple[int, int], key: tuple, cache) -> MemberOutline:
    """A member's outline (its verdict comes later, in ``_assemble``): from the cache, else parsed."""
    cached = cache.get(key)
    if cached is not None:
        return cached.at(span[0], chunk.split.class_line)
    try:
        tree = parse_member(chunk.lines, span)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return MemberOutline(span[0], span[1], chunk.split.class_line, [], frozenset(), frozenset(), span[1], (),
                             errors=[syntax_error_dict(err, chunk.lines, at_line(span[0]))])
    ctx = _Context(chunk.lines, at_line(span[0]), chunk.constants, chunk.aliases)
    functions, names = [], []
    for item in tree.body:
        if isinstance(item, ast.FunctionDef):
            names.append(item.name)
            kind = unit_kind(item, chunk.aliases)
            if kind in ("prim_func", "relax_function"):
                functions.append(_function(item, kind, ctx, name, name))
    last = max([(s.end_lineno or s.lineno) for s in tree.body] or [2]) - 1 + at_line(span[0])
    outline = MemberOutline(span[0], span[1], chunk.split.class_line, functions, frozenset(names),
                            frozenset(names_bound_anywhere(tree)), last, ())
    outline.tree = tree    # kept until its verdict is computed (``_assemble``), never cached
    return outline


def _assemble(chunk: ClassChunk, header: ast.ClassDef, members: list[MemberOutline], keys: list, cache):
    """The unit and its functions; members whose verdict no longer holds are gated again."""
    lines, split = chunk.lines, chunk.split
    functions = set().union(*(m.names for m in members))
    bound = set(names_bound_anywhere(header)).union(*(m.bound for m in members))
    cls = ClassContext(header, split.class_line, functions, bound, chunk.aliases, chunk.constants)
    frame = {header.name: f"module:{header.name}"}
    head = gate_member(header.body, cls, frame, lines, split.header[0], header=True)  # + ``pass``: finds nothing
    verdicts, done = [], []
    for member, key in zip(members, keys):
        before = tuple(sorted(frame.items()))
        if member.verdict is None or member.frame_before != before or \
                not still_holds(member.verdict.asked, bound, functions):
            tree = getattr(member, "tree", None) or parse_member(lines, (member.start, member.end))
            member = replace(member, frame_before=before,
                             verdict=gate_member(tree.body, cls, frame, lines, at_line(member.start)))
        if member is not cache.get(key):
            cache.put(key, member)   # gated again or moved: the next edit starts from here
        verdicts.append(member.verdict)
        done.append(member)
        frame = member.verdict.frame
    first = min([d.lineno for d in header.decorator_list] + [header.lineno]) - 1 + split.header[0]
    last = done[-1].last
    unit = Unit(header.name, "ir_module", first, last, make_range(first, 0, last, len(lines[last])))
    fns = [f for m in done for f in m.functions]
    unit.functions = [f.id for f in fns]
    result = class_verdict(head, verdicts, chunk.aliases)
    unit.problems, unit.notes = result.problems, result.notes
    return [unit], fns
