"""The package's layout holds (docs/architecture.md): rooms import one way, TVM only through
worker/compat.py, the core imports with TVM unimportable, files and functions stay small."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "asight_lsp"
TVM = ("tvm", "tvm_ffi")

# room -> the rooms it may import (its own room is always allowed)
ALLOWED = {
    "errors": set(), "protocol": set(), "__init__": set(),
    "engine": {"errors", "protocol"},
    "tvmscript": {"errors", "engine"},
    "store": {"errors", "tvmscript"},
    "analysis": {"errors", "tvmscript"},
    "views": {"errors", "protocol", "tvmscript", "store", "analysis"},
    "services": {"errors", "protocol", "engine", "tvmscript", "store", "analysis", "views"},
    "server": {"errors", "protocol", "engine", "tvmscript", "store", "analysis", "views", "services", "__init__"},
    "commands": {"errors", "protocol", "engine", "tvmscript", "store", "analysis", "views", "services", "server"},
    "cli": {"errors", "commands"},
    "__main__": {"cli"},
    "worker": {"errors", "protocol", "engine", "tvmscript", "store", "analysis"},
    "examples": set(),
}


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        package = parts[:-1] if parts[-1] != "__init__" else parts
        yield path, parts, package


def _room(parts: list[str]) -> str:
    """The folder (or top-level module) a module lives in; a name of the package face is ``__init__``."""
    if len(parts) < 2 or not ((PKG / parts[1]).is_dir() or (PKG / f"{parts[1]}.py").is_file()):
        return "__init__"
    return parts[1]


def _imports(path: Path, package: list[str]):
    """(imported dotted module, line) of every import statement, lazy ones included."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "asight_lsp":   # from asight_lsp import X / from .. import X
                for alias in node.names:
                    yield f"asight_lsp.{alias.name}", node.lineno
            else:
                yield target, node.lineno


def test_rooms_import_one_way_and_tvm_only_through_compat():
    wrong = []
    for path, parts, package in _modules():
        room = _room(parts)
        for target, line in _imports(path, package):
            where = f"{path.relative_to(ROOT)}:{line} imports {target}"
            top = target.split(".")[0]
            if top in TVM and path != PKG / "worker" / "compat.py" and room != "examples":
                wrong.append(f"{where} (TVM only through worker/compat.py)")
            if top != "asight_lsp":
                continue
            other = _room(target.split("."))
            if other == room:
                continue
            if other not in ALLOWED.get(room, set()):
                wrong.append(f"{where} ({room} may not import {other})")
            elif room == "commands" and other == "server" and parts[-1] != "serve":
                wrong.append(f"{where} (only `asight serve` starts the server)")
    assert not wrong, "\n".join(wrong)


def test_files_and_functions_stay_small():
    big = []
    for path, _, _ in _modules():
        text = path.read_text()
        if len(text.splitlines()) > 500:
            big.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                big.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not big, "\n".join(big)


def test_unit_tests_never_import_the_worker_or_tvm():
    wrong = []
    for path in sorted((ROOT / "tests" / "unit").glob("*.py")):
        for target, line in _imports(path, ["tests", "unit"]):
            if target.split(".")[0] in TVM or target.startswith("asight_lsp.worker"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_with_tvm_unimportable(tmp_path):
    """Every module outside worker/ imports in a process where ``import tvm`` fails."""
    for name in TVM:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('TVM is blocked in this process')\n")
    modules = [".".join(parts) if parts[-1] != "__init__" else ".".join(parts[:-1])
               for _, parts, _ in _modules() if _room(parts) not in ("worker", "examples", "__main__")]
    script = textwrap.dedent(f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        leaked = sorted(m for m in sys.modules if m.split('.')[0] in {TVM!r})
        print('leaked', leaked)
        sys.exit(1 if leaked else 0)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_test_files_have_unique_names():
    """pytest imports test files by basename (no packages under tests/): two files of one name in
    different folders stop the whole run at collection."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {n: p for n, p in names.items() if len(p) > 1}
