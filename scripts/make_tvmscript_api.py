"""Write ``asight_lsp/tvmscript/tvmscript_api.py``: TVMScript's API by exact member, from the installed TVM.

    python scripts/make_tvmscript_api.py          # rewrite the data module
    python scripts/make_tvmscript_api.py --check  # exit 1 when the committed module is stale

The static gate (``tvmscript/safety.py``) lets an attribute chain rooted at a TVMScript namespace
through only when the whole dotted path is listed here.  What is listed (docs/safety.md):

* the public members of the four namespaces TVM's parser binds (``T``, ``R``, ``I``, ``Tx``): a
  module's ``__all__`` (or, without one, the names it defines itself), an object's public attributes;
* sub-namespaces that TVMScript exports (``R.nn``, ``T.cuda``, ``T.cuda.wgmma`` ...) as *prefixes*
  (usable only as the start of a longer path, never as a value) and their members;
* a class's own static members (``T.axis.spatial``), an object's public attributes (``T.let.as_var``);
* *chains*: objects whose every attribute is another such object (``T.ptx.cp`` ...``.async_``, PTX
  instruction modifiers): any further identifier may follow them.

Never listed: a module that is not a TVMScript sub-namespace (``T.entry``, ``Tx.functools``, ...),
anything reached through one, underscore names (but a device namespace's ``__shfl_sync``-style
intrinsics, which its ``dir()`` lists), objects TVM does not define, and the members in
``SIDE_EFFECTS`` (they read files or start compilers while a file is parsed) and those that change
TVM's process-wide state (``GLOBAL_STATE``, any ``register*``: they would change later files).
"""
from __future__ import annotations

import argparse
import functools
import keyword
import inspect
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "asight_lsp" / "tvmscript" / "tvmscript_api.py"

# Members that do more than build IR when they are called at parse time.
# T.call_kernel: reads a source file given by path, runs nvcc/nvrtc.  R.rewriter: parses the class it is
# given (``tvm.script.ir_module``: its source, read with inspect, evaluated by TVM's parser), and a
# script can name classes of TVM's own (issue 22: the only listed callable whose code parses source).
SIDE_EFFECTS = {"T.call_kernel", "R.rewriter"}
# Members that change TVM's process-wide state, so that one file would change how every later file in
# the long-lived worker parses (red team round 4, F2: ``T.register_script_namespace("Buffer", T.int8)``
# rebound ``T.Buffer``).  Matched by the last name (``GLOBAL_STATE_PREFIXES``) as well as listed, so
# that a new ``register_*`` in a later TVM stays out when the module is regenerated.
GLOBAL_STATE = {"T.register_script_namespace"}
GLOBAL_STATE_PREFIXES = ("register", "unregister", "set_global", "set_default", "set_config")


def changes_global_state(full: str) -> bool:
    """A member whose call mutates a registry or a module's globals (never allowed; docs/safety.md)."""
    return full in GLOBAL_STATE or full.rsplit(".", 1)[-1].startswith(GLOBAL_STATE_PREFIXES)
# Entry points: allowed only as decorators (their kind as the outline names it).
DECORATOR_MEMBERS = {"T.prim_func": "prim_func", "T.inline": "inline", "T.macro": "macro", "T.jit": "jit",
                     "R.function": "relax_function", "R.macro": "macro", "I.ir_module": "ir_module",
                     "I.pyfunc": "pyfunc"}
# ``from MODULE import NAME`` (or ``import MODULE.NAME as X``) spellings that bind a namespace.
IMPORT_SPELLINGS = {("tvm.script", "tirx"): "T", ("tvm.script", "relax"): "R", ("tvm.script", "ir"): "I",
                    ("tvm.script.parser", "tirx"): "T", ("tvm.script.parser", "relax"): "R",
                    ("tvm.script.parser", "ir"): "I", ("tvm.script.tirx", "tile"): "Tx"}
# Attributes allowed on values (bound names, call results): public attributes of the IR classes a
# TVMScript expression yields, less what mutates TVM's registries, prints, or reaches packed functions.
VALUE_DENY = {"set_attr", "reset_attr", "set_attrs_type_key", "set_num_inputs", "set_support_level",
              "add_argument", "get_attr", "list_op_names", "show", "script"}
MAX_DEPTH = 4


def namespaces() -> dict:
    from tvm.script.parser.core.entry import _default_globals
    env = _default_globals()
    return {"T": env["T"], "R": env["R"], "I": env["I"], "Tx": env["Tx"]}


def _defined_by_tvm(value) -> bool:
    if isinstance(value, functools.partial):  # T.alloc_shared = partial(alloc_buffer, scope="shared")
        value = value.func
    module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "")
    return isinstance(module, str) and module.split(".")[0] in ("tvm", "tvm_ffi")


def _public_names(obj) -> list[str]:
    if isinstance(obj, types.ModuleType):
        # what it exports, and what TVM itself defines there (never a module it merely imports)
        names = set(getattr(obj, "__all__", ())) | {n for n, v in vars(obj).items()
                                                   if not isinstance(v, types.ModuleType) and _defined_by_tvm(v)}
        return sorted(n for n in names if not n.startswith("_"))
    if inspect.isclass(obj):
        return sorted(n for n, v in vars(obj).items() if not n.startswith("_")
                      and isinstance(v, (staticmethod, classmethod, int, float, str, bool)))
    names = [n for n in dir(obj) if not n.startswith("_")]
    if type(obj).__name__.endswith("Namespace"):  # device intrinsics spelled as in CUDA: T.cuda.__shfl_sync
        names += [n for n in dir(obj) if n.startswith("__") and not n.endswith("__")]
    return sorted(names)


def _is_literal(value) -> bool:
    return value is None or isinstance(value, (int, float, str, bool))


def _is_open_chain(value) -> bool:
    """An object whose every public attribute is another object of its type (``T.ptx.cp.async_`` ...):
    ``__getattr__`` in the class, ``__slots__``, and no public name of its own."""
    cls = type(value)
    return "__getattr__" in vars(cls) and "__slots__" in vars(cls) and _defined_by_tvm(value) \
        and not any(not n.startswith("_") for n in vars(cls))


def _answered_names(obj, probes: set) -> list[str]:
    """Names a namespace object answers through its own ``__getattr__`` that ``dir()`` does not show:
    its root namespace's op names (``Tx.cta.copy``) and keyword escapes (``T.ptx.and_``)."""
    if not ("__getattr__" in vars(type(obj)) and type(obj).__name__.endswith("Namespace")):
        return []
    candidates = set(probes) | {f"{n}_" for n in dir(obj) if keyword.iskeyword(n)}
    found = []
    for name in sorted(candidates):
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001 - not answered: not API
            continue
        if _defined_by_tvm(value) and not isinstance(value, types.ModuleType):
            found.append(name)
    return found


def _walk(obj, path: str, depth: int, found: dict, exports: set, probes: set = frozenset()) -> None:
    names = _public_names(obj)
    names += [n for n in _answered_names(obj, probes) if n not in names]
    for name in names:
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails is simply not API
            continue
        full = f"{path}.{name}"
        if full in SIDE_EFFECTS or changes_global_state(full):
            continue
        if isinstance(value, types.ModuleType):
            if name in exports and value.__name__.startswith("tvm.") and depth < MAX_DEPTH:
                found["prefixes"].add(full)  # a TVMScript sub-namespace such as R.nn: a prefix, never a value
                _walk(value, full, depth + 1, found, set(), probes)
            continue
        if not (_is_literal(value) or _defined_by_tvm(value)):
            continue
        if _is_open_chain(value):
            found["chains"].add(full)  # any further attribute is another chain (PTX instructions)
            continue
        namespace = type(value).__name__.endswith("Namespace")
        found["prefixes" if namespace else "members"].add(full)
        if namespace and "__getitem__" in vars(type(value)):
            found["subscriptable"].add(full)
        if not _is_literal(value) and not isinstance(value, functools.partial) and depth < MAX_DEPTH:
            _walk(value, full, depth + 1, found, set(), probes)


def value_classes() -> list:
    """The IR classes a TVMScript expression yields (expressions, types, frames, ranges)."""
    import tvm
    from tvm.script.ir_builder.base import IRBuilderFrame

    roots = [tvm.ir.expr.Expr, tvm.ir.Type, tvm.ir.Range, tvm.tirx.IterVar, IRBuilderFrame]
    found, todo = set(), list(roots)
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    found.add(namespaces()["I"].meta_var)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def value_attributes() -> set:
    names = set()
    for cls in value_classes():
        names |= {n for n in dir(cls) if not n.startswith("_")}
    text_methods = set(dir(str)) | set(dir(bytes)) | set(dir(type))  # no string building, no type walking
    return names - text_methods - VALUE_DENY


def derive() -> dict:
    """Everything the data module holds, from the installed TVM."""
    import tvm
    found = {"members": set(), "prefixes": set(), "chains": set(), "subscriptable": set()}
    for root, module in namespaces().items():
        _walk(module, root, 1, found, set(getattr(module, "__all__", [])), set(_public_names(module)))
    found["members"] = {m for m in found["members"]
                        if m not in DECORATOR_MEMBERS and m.rsplit(".", 1)[0] not in DECORATOR_MEMBERS}
    decorators = dict(DECORATOR_MEMBERS)
    decorators.update(_absolute_decorators())
    return {"version": tvm.__version__, **{k: sorted(v) for k, v in found.items()},
            "decorators": dict(sorted(decorators.items())), "value_attributes": sorted(value_attributes()),
            "imports": {f"{m}:{n}": ns for (m, n), ns in sorted(IMPORT_SPELLINGS.items())},
            "parser_globals": sorted(_parser_globals())}


def _parser_globals() -> set:
    from tvm.script.parser.core.entry import _default_globals
    return set(_default_globals())


def _absolute_decorators() -> dict:
    """``tvm.script....`` spellings TVM resolves to the same decorator objects (``@tvm.script.ir_module``)."""
    import tvm
    by_object = {}
    for dotted, kind in DECORATOR_MEMBERS.items():
        root, name = dotted.split(".")
        by_object[id(getattr(namespaces()[root], name))] = kind
    found = {}
    heads = ["tvm.script", "tvm.script.parser", "tvm.script.ir", "tvm.script.parser.ir",
             "tvm.script.tirx", "tvm.script.relax", "tvm.script.parser.tirx", "tvm.script.parser.relax"]
    for head in heads:
        for name in ("ir_module", "pyfunc", "prim_func", "inline", "macro", "jit", "function"):
            value = tvm
            try:
                for part in f"{head}.{name}".split(".")[1:]:
                    value = getattr(value, part)
            except AttributeError:
                continue
            if id(value) in by_object:
                found[f"{head}.{name}"] = by_object[id(value)]
    return found


def _wrapped(words: list[str], indent: str, width: int = 108) -> str:
    lines, line = [], ""
    for word in words:
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(f'{indent}"{text} "' for text in lines)


def render(data: dict) -> str:
    head = f'''"""TVMScript's API by exact member, as TVM {data["version"]} defines it (docs/safety.md).

Generated by ``scripts/make_tvmscript_api.py`` from the installed TVM; do not edit.  Dotted paths
are written from the namespace's own name (``T.axis.spatial``); the core never imports TVM.
"""

TVM_VERSION = "{data["version"]}"

'''
    parts = [head]
    for key, title in (("members", "MEMBERS"), ("prefixes", "PREFIXES"), ("chains", "CHAINS"),
                       ("subscriptable", "SUBSCRIPTABLE"),
                       ("value_attributes", "VALUE_ATTRIBUTES"), ("parser_globals", "PARSER_GLOBALS")):
        parts.append(f"{title} = frozenset((\n{_wrapped(data[key], '    ')}\n).split())\n\n")
    parts.append("DECORATORS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in data["decorators"].items())
                 + "}\n\n")
    parts.append("IMPORTS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in data["imports"].items()) + "}\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed module differs")
    args = parser.parse_args(argv)
    text = render(derive())
    if args.check:
        same = TARGET.read_text() == text
        print("up to date" if same else f"{TARGET} is stale: run scripts/make_tvmscript_api.py")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
