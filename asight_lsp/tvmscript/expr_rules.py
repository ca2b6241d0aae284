"""The gate's rules for one expression, in a given scope (docs/safety.md).

An expression passes when it is built only from literals, operators, names bound at that point
(``scope.py``), listed TVMScript members (``namespaces.py``: the whole dotted path), the attributes
TVMScript reads on values, a few harmless builtins, lambdas and comprehensions whose bodies pass the
same rules, and ``metadata["type"][i]`` references.  Everything else is a finding: the node, the
statement TVM would report it at (``anchor``) and why.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from . import namespaces as api
from .printed import METADATA, is_reference, params_entries
from .pysource import fold_refusal
from .scope import VALUE, Scope

FORBIDDEN = {ast.NamedExpr: "assignment expressions (:=)", ast.Yield: "yield", ast.YieldFrom: "yield",
             ast.Await: "await"}
# Calls whose string arguments TVM evaluates as Python (shape strings of parameter annotations).
SHAPE_CALLS = {"R.Tensor", "R.Shape", "T.Buffer"}
# The kind of a module constant named like a builtin or parser global (``exec = 0``): never used.
SHADOW = "shadow"
# The kind of a name a Relax block or ``if`` binds by a variable's name hint, when that name is a
# builtin's, a parser global's or a namespace's (``stmt_rules.RelaxBody.bind_hinted``): never used.
HINTED = "hinted"
# What TVM's ``eval_assign`` sees: ``exec("target = rhs", {}, locals)``, no name of the script.
TARGET_SCOPE = Scope({})


@dataclass
class Findings:
    """What the gate found in one unit, and what it needs to know about the file."""
    aliases: dict
    class_functions: dict = field(default_factory=dict)  # class name -> its function names
    bound_anywhere: set = field(default_factory=set)
    constants: dict = field(default_factory=dict)       # the file's literal constants (``module_constants``)
    problems: list = field(default_factory=list)        # (node, anchor, message)
    references: list = field(default_factory=list)      # (node, anchor, in a func_attr "params" entry)

    def refuse(self, node: ast.AST, anchor: ast.AST, message: str) -> None:
        self.problems.append((node, anchor, message))



class ExprRules:
    """Checks expressions; ``check(node, scope, anchor)`` records findings, returns nothing."""

    def __init__(self, findings: Findings):
        self.found = findings
        self.params_refs: set[int] = set()  # ids of metadata references inside func_attr "params"
        self.in_target = False  # checking what an assignment target reads (``check_target``)

    # -- entry points
    def check(self, node: ast.AST | None, scope: Scope, anchor: ast.AST, decorator: bool = False) -> None:
        if node is None:
            return
        if isinstance(node, ast.Call) and decorator:
            self._call(node, scope, anchor, decorator=True)
            return
        if isinstance(node, ast.Attribute) and decorator and self._decorator_path(node, scope):
            return
        method = getattr(self, f"_{type(node).__name__}", None)
        if type(node) in FORBIDDEN:
            self.found.refuse(node, anchor, FORBIDDEN[type(node)])
        elif method is not None:
            method(node, scope, anchor)
        else:
            for child in ast.iter_child_nodes(node):
                self.check(child, scope, anchor)

    def check_target(self, target: ast.AST, anchor: ast.AST) -> None:
        """What TVM's ``eval_assign`` evaluates in a target (``target = rhs`` run with empty globals):
        the object of an attribute, the value and index of a subscript, at any depth of a tuple,
        list or starred target.  Every name read there is a Python builtin (or a name the same
        target stored before it), whatever the script bound: only the harmless builtins pass."""
        for part in stored_parts(target):
            if isinstance(part, ast.Attribute):
                reads = [part.value]
            elif isinstance(part, ast.Subscript):
                reads = [part.value, part.slice]
            else:
                continue
            self.in_target = True
            try:
                for node in reads:
                    self.check(node, TARGET_SCOPE, anchor)
            finally:
                self.in_target = False

    def check_shape_strings(self, call: ast.Call, scope: Scope, anchor: ast.AST) -> None:
        """Strings TVM evaluates as code: those in the shape of ``R.Tensor``/``R.Shape``/``T.Buffer``."""
        for const in shape_strings(call):
            self.check_code_string(const, scope, anchor)

    def check_code_string(self, const: ast.Constant, scope: Scope, anchor: ast.AST) -> None:
        """A string TVM will ``eval``: its identifiers may be new symbolic variables, nothing else new."""
        tree = parse_code_string(const.value)
        if tree is None:
            return  # TVM cannot compile it either: an error, never code
        inner = Scope(frames=scope.snapshot().frames + [{name: VALUE for name in free_names(tree, scope)}])
        before = len(self.found.problems)
        self.check(tree.body, inner, anchor)
        for i in range(before, len(self.found.problems)):
            _, where, message = self.found.problems[i]
            self.found.problems[i] = (const, where, f"in the shape string {const.value!r}: {message}")

    # -- arithmetic
    def _BinOp(self, node: ast.BinOp, scope: Scope, anchor: ast.AST) -> None:
        """TVM's parser computes arithmetic of literals in Python: what the static reader refuses to
        fold (``pysource.FoldRefused``: ``10 ** 10 ** 10``, ``"a" * 10 ** 9``) is refused here, once,
        at the operation that is too large."""
        self.check(node.left, scope, anchor)
        self.check(node.right, scope, anchor)
        why = fold_refusal(node, self.found.constants)
        if why:
            self.found.refuse(node, anchor, why)

    def _Constant(self, node: ast.Constant, scope: Scope, anchor: ast.AST) -> None:
        why = fold_refusal(node, self.found.constants)
        if why:
            self.found.refuse(node, anchor, why)

    # -- names and attributes
    def _Name(self, node: ast.Name, scope: Scope, anchor: ast.AST) -> None:
        if isinstance(node.ctx, ast.Store):
            return
        kind = scope.lookup(node.id)
        if node.id.startswith("__"):
            self.found.refuse(node, anchor, f"dunder name '{node.id}'")
        elif kind is not None and kind.startswith("ns:"):
            self.found.refuse(node, anchor, f"the namespace '{node.id}' used as a value")
        elif kind == HINTED:
            what = "a TVMScript namespace" if node.id not in api.SHADOWING else \
                "one of TVM's parser globals" if node.id in api.PARSER_GLOBALS else "Python's builtin"
            self.found.refuse(node, anchor, f"name '{node.id}' after a Relax dataflow block or if: TVM binds the "
                                            f"variable's name hint there, and where that is not '{node.id}', "
                                            f"'{node.id}' is {what}; rename it")
        elif kind is not None and kind.startswith("macro!"):
            self.found.refuse(node, anchor, f"the macro '{node.id}' is refused: "
                                            f"{kind[len('macro!'):].removeprefix('not evaluated: ')}")
        elif (kind is None or kind == SHADOW) and node.id not in api.SAFE_BUILTINS:
            self.found.refuse(node, anchor, self._unbound(node.id, kind))

    def _unbound(self, name: str, kind: str | None = None) -> str:
        if self.in_target:
            return (f"name '{name}' in an assignment target (TVM runs the target with empty globals: "
                    "it would be Python's builtin, whatever the script bound)")
        if kind == SHADOW:
            return (f"the module constant '{name}' has the name of a Python builtin or TVM parser global: "
                    "TVM evaluates assignment targets and some shape strings with the builtins only, so "
                    "the gate does not use it; rename it")
        if name in self.found.bound_anywhere:
            return (f"name '{name}' is used where it is not bound (TVM would take it from its parser "
                    "globals or Python's builtins)")
        if name in api.RESERVED:
            return f"name '{name}' is not TVMScript (it would reach TVM's parser globals or Python's builtins)"
        return f"name '{name}' is neither TVMScript, bound by the script, nor a literal constant"

    def _Attribute(self, node: ast.Attribute, scope: Scope, anchor: ast.AST) -> None:
        chain, root = [], node
        while isinstance(root, ast.Attribute):
            chain.insert(0, root)
            root = root.value
        names = [a.attr for a in chain]
        kind = scope.lookup(root.id) if isinstance(root, ast.Name) else None
        underscored = next((a for a in chain if a.attr.startswith("_")), None)
        if underscored is not None and not (kind and kind.startswith("ns:") and api.path_kind(
                ".".join([kind[3:], *names])) == "member"):  # only an exactly listed T.cuda.__shfl_sync
            self.found.refuse(underscored, anchor, f"private or dunder attribute '.{underscored.attr}'")
            return
        if kind is not None and kind.startswith("ns:"):
            self._member(node, kind[3:], names, anchor)
        elif kind is not None and kind.startswith("module:"):
            functions = self.found.class_functions.get(kind[7:], frozenset())
            if names[0] not in functions:
                self.found.refuse(node, anchor, f"'{root.id}.{names[0]}' is not a function of the module")
            else:
                self._value_attributes(chain[1:], anchor)
        else:
            self.check(root, scope, anchor)
            self._value_attributes(chain, anchor)

    def _member(self, node: ast.AST, namespace: str, names: list[str], anchor: ast.AST) -> None:
        count, kind = api.longest_listed(namespace, names)
        path = ".".join([namespace, *names[:count]])
        if kind is None:
            self.found.refuse(node, anchor, f"'{namespace}.{'.'.join(names)}' is not part of TVMScript")
        elif kind == "decorator":
            self.found.refuse(node, anchor, f"'{path}' is used only as a decorator")
        elif kind == "chain":
            pass
        elif kind == "prefix":
            what = f"'{path}.{names[count]}' is not part of TVMScript" if count < len(names) \
                else f"the namespace '{path}' used as a value"
            self.found.refuse(node, anchor, what)
        else:
            rest = names[count:]
            bad = next((n for n in rest if not api.is_value_attribute(n)), None)
            if bad is not None:
                self.found.refuse(node, anchor, f"'{path}.{'.'.join(rest)}' is not part of TVMScript")

    def _value_attributes(self, chain: list[ast.Attribute], anchor: ast.AST) -> None:
        for attr in chain:
            if not api.is_value_attribute(attr.attr):
                self.found.refuse(attr, anchor, f"attribute '.{attr.attr}' is not one TVMScript reads on values")
                return

    def _member_name(self, func: ast.AST, scope: Scope) -> str | None:
        """``R.Tensor`` for ``R.Tensor`` or ``relax_alias.Tensor``: the listed path a callee names."""
        parts = []
        while isinstance(func, ast.Attribute):
            parts.insert(0, func.attr)
            func = func.value
        kind = scope.lookup(func.id) if isinstance(func, ast.Name) else None
        if kind is None or not kind.startswith("ns:"):
            return None
        return ".".join([kind[3:], *parts])

    def _decorator_path(self, node: ast.AST, scope: Scope) -> bool:
        """A decorator spelled exactly as TVM's entry points are (``T.prim_func``, ``tvm.script.ir_module``)."""
        name = self._member_name(node, scope)
        if name is not None:
            return api.decorator_of(name) is not None
        parts = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        return isinstance(node, ast.Name) and scope.lookup(node.id) is None \
            and api.decorator_of(".".join([node.id, *parts])) is not None

    # -- calls, subscripts, scopes of their own
    def _Call(self, node: ast.Call, scope: Scope, anchor: ast.AST) -> None:
        self._call(node, scope, anchor)

    def _call(self, node: ast.Call, scope: Scope, anchor: ast.AST, decorator: bool = False) -> None:
        func = node.func
        if decorator and self._decorator_path(func, scope):
            pass
        elif isinstance(func, ast.Name) and scope.lookup(func.id) in (None, SHADOW) \
                and func.id not in api.SAFE_BUILTINS:
            self.found.refuse(func, anchor, f"call of '{func.id}': {self._unbound(func.id, scope.lookup(func.id))}")
        else:
            self.check(func, scope, anchor)
        if isinstance(func, ast.Attribute) and func.attr == "func_attr":
            for _, value in params_entries(node):
                self.params_refs.update(id(e) for e in value.elts)
        if self._member_name(func, scope) in SHAPE_CALLS:
            self.check_shape_strings(node, scope, anchor)
        for arg in node.args:
            self.check(arg, scope, anchor)
        for keyword in node.keywords:
            self.check(keyword.value, scope, anchor)

    def _Subscript(self, node: ast.Subscript, scope: Scope, anchor: ast.AST) -> None:
        if is_reference(node) and scope.lookup(METADATA) is None:
            self.found.references.append((node, anchor, id(node) in self.params_refs))
            return
        if not api.is_subscriptable(self._member_name(node.value, scope) or ""):
            self.check(node.value, scope, anchor)
        self.check(node.slice, scope, anchor)

    def _Lambda(self, node: ast.Lambda, scope: Scope, anchor: ast.AST) -> None:
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.check(default, scope, anchor)
        inner = scope.snapshot()
        with inner.frame():
            for arg in all_arguments(node.args):
                inner.bind(arg.arg)
            self.check(node.body, inner, anchor)

    def _comprehension(self, node, scope: Scope, anchor: ast.AST, results: list[ast.AST]) -> None:
        self.check(node.generators[0].iter, scope, anchor)  # the first iterable is evaluated outside
        inner = scope.snapshot()
        with inner.frame():
            for i, gen in enumerate(node.generators):
                if i:
                    self.check(gen.iter, inner, anchor)
                self.check(gen.target, inner, anchor)
                inner.bind_targets(gen.target)
                for cond in gen.ifs:
                    self.check(cond, inner, anchor)
            for result in results:
                self.check(result, inner, anchor)

    def _ListComp(self, node, scope, anchor):
        self._comprehension(node, scope, anchor, [node.elt])

    _SetComp = _GeneratorExp = _ListComp

    def _DictComp(self, node, scope, anchor):
        self._comprehension(node, scope, anchor, [node.key, node.value])


def all_arguments(args: ast.arguments) -> list[ast.arg]:
    """Every parameter of a signature, in order (Python binds them all when it runs a function)."""
    found = args.posonlyargs + args.args + args.kwonlyargs
    return found + [a for a in (args.vararg, args.kwarg) if a is not None]


def stored_parts(target: ast.AST) -> list[ast.AST]:
    """The parts of an assignment target Python stores into, through tuples, lists and starred."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [part for element in target.elts for part in stored_parts(element)]
    if isinstance(target, ast.Starred):
        return stored_parts(target.value)
    return [target]


def shape_strings(call: ast.Call) -> list[ast.Constant]:
    """The string constants in a shape call's first argument (or ``shape=`` / ``values=``)."""
    shape = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("shape", "values")),
                                                None)
    if shape is None:
        return []
    return [c for c in ast.walk(shape) if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def parse_code_string(text: str) -> ast.Expression | None:
    """A string as the expression TVM would compile (``compile(text, "<string>", "eval")``), or None."""
    for candidate in (text, text.strip()):
        try:
            return ast.parse(candidate, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def free_names(tree: ast.AST, scope: Scope) -> set[str]:
    """Identifiers of a code string that are new symbolic variables: unbound, not reserved, not dunder."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and scope.lookup(n.id) is None
            and n.id not in api.RESERVED and not n.id.startswith("__")}
