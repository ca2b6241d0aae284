"""Precision of the static gate: ASight's verdict vs TVM's own on TVMScript from TVM's test suite.

    python bench/gate_corpus.py [REPO] [--limit N] [--match SUBSTRING] [--json OUT] [--show 5]

REPO is a git directory of apache/tvm (default: the local mirror, read with ``git ls-tree``/``git
show``; nothing is copied into this repository).  Every top-level or class-level decorated def/class
of ``tests/python/**`` that is TVMScript (``@T.prim_func``, ``@R.function``, ``@I.ir_module``,
``@tvm.script.ir_module`` ...) becomes one item: a file holding the test module's namespace imports
and literal constants, then the item.

* TVM's verdict: ``tvm.script.from_source`` in a child process (per-item timeout), with the globals
  the test's decorator would give it (TVM's parser globals, the module's namespace aliases and
  literal constants) and the decorator's ``check_well_formed``.
* ASight's verdict: ``tvmscript.diagnostics.check_text`` with a real worker.

Agreement: same verdict, and when both refuse, TVM's error line is one of ASight's error lines
(TVM places a well-formedness error on the whole module: its verdict alone counts).  Items that use
other names of the test module (helpers, fixtures, non-literal globals) are counted apart: no
standalone parse can reproduce them.  Prints agreement %, crashes, and the disagreements by reason.
"""
from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from asight_lsp.engine.client import WorkerClient  # noqa: E402
from asight_lsp.tvmscript.diagnostics import check_text  # noqa: E402
from asight_lsp.tvmscript.model import DEFAULT_ALIASES  # noqa: E402
from asight_lsp.tvmscript.pysource import decorator_keyword, module_constants, namespace_aliases, unit_kind  # noqa: E402

MIRROR = "/work/.mirror/apache+tvm/repo"
IMPORTS = {"T": "from tvm.script import tirx as {}", "R": "from tvm.script import relax as {}",
           "I": "from tvm.script import ir as {}", "Tx": "from tvm.script.tirx import tile as {}"}
LOCATION = re.compile(r"--> [^:\n]+:(\d+):(\d+)")


# --------------------------------------------------------------------------- the corpus

def test_files(repo: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", "tests/python"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.splitlines() if p.endswith(".py"))


def read(repo: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def items_of(path: str, text: str, nested: bool = False) -> list[dict]:
    """Every top-level or class-level TVMScript unit of one test file (with ``nested``, also those
    inside test functions), as a standalone file."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    aliases = {k: v for k, v in {**DEFAULT_ALIASES, **namespace_aliases(tree)}.items() if v in IMPORTS}
    constants = module_constants(tree)
    module_names = _module_level_names(tree)
    header = ["import tvm"] + [IMPORTS[ns].format(name) for name, ns in sorted(aliases.items())]
    header += [f"{name} = {value!r}" for name, value in constants.items()]
    found = []
    for holder, node in _candidates(tree, nested):
        kind = unit_kind(node, aliases)
        if kind not in ("ir_module", "prim_func", "relax_function"):
            continue
        source = _source(text, node)
        outer = _class_names(holder) if isinstance(holder, ast.ClassDef) else _local_names(holder)
        free = _free_names(node) & (module_names | outer) - set(aliases) - set(constants)
        found.append({"id": f"{path}:{node.lineno}:{node.name}", "text": "\n".join(header) + "\n\n\n" + source,
                      "first_line": len(header) + 3, "kind": kind, "needs_module": sorted(free),
                      "constants": constants, "aliases": aliases,
                      "check_well_formed": bool(decorator_keyword(node, "check_well_formed", True))})
    return found


def _candidates(tree: ast.Module, nested: bool):
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and stmt.decorator_list:
            yield None, stmt
        if isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if isinstance(inner, (ast.FunctionDef, ast.ClassDef)) and inner.decorator_list:
                    yield stmt, inner
        if nested and isinstance(stmt, ast.FunctionDef) and not stmt.decorator_list:
            for inner in _inner_units(stmt.body):
                yield stmt, inner


def _inner_units(body: list[ast.stmt]):
    """Decorated defs/classes in a test function's body (not inside another decorated one)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and stmt.decorator_list:
            yield stmt
        elif isinstance(stmt, (ast.ClassDef, ast.If, ast.For, ast.With, ast.Try)):
            for field in ("body", "orelse", "finalbody"):
                yield from _inner_units(getattr(stmt, field, []) or [])


def _local_names(func: ast.FunctionDef | None) -> set[str]:
    if func is None:
        return set()
    names = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    return names | {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} \
        | {f.name for f in ast.walk(func) if isinstance(f, (ast.FunctionDef, ast.ClassDef)) and f is not func}


def _source(text: str, node: ast.AST) -> str:
    lines = text.splitlines()
    first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    return textwrap.dedent("\n".join(lines[first:node.end_lineno])) + "\n"


def _module_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        else:
            names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names - {"tvm"}


def _class_names(holder: ast.ClassDef | None) -> set[str]:
    if holder is None:
        return set()
    return {n.id for s in holder.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))
            for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _free_names(node: ast.AST) -> set[str]:
    """Names the item loads and never binds (a class's bases are never evaluated by TVM)."""
    own = {node.name}
    if isinstance(node, ast.ClassDef):
        node = ast.Module(body=node.body + node.decorator_list, type_ignores=[])
    bound = own | {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
    bound |= {f.name for f in ast.walk(node) if isinstance(f, (ast.FunctionDef, ast.ClassDef))}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


# --------------------------------------------------------------------------- TVM's verdict (child)

def tvm_child() -> None:
    """Parse items read as JSON lines on stdin with TVM itself; one JSON line back per item."""
    import tvm
    from tvm.script.parser.core.entry import _default_globals
    env0 = _default_globals()
    spaces = {"T": env0["T"], "R": env0["R"], "I": env0["I"], "Tx": env0["Tx"]}
    for raw in sys.stdin:
        item = json.loads(raw)
        env = _default_globals()
        env.update({name: spaces[ns] for name, ns in item["aliases"].items()})
        env.update(item["constants"])
        lines = item["text"].splitlines()
        masked = "\n" * (item["first_line"] - 1) + "\n".join(lines[item["first_line"] - 1:])
        try:
            tvm.script.from_source(masked, extra_vars=env, check_well_formed=item["check_well_formed"])
            answer = {"ok": True}
        except SyntaxError as err:
            answer = {"ok": False, "line": err.lineno, "message": f"syntax error: {err.msg}", "kind": "parse"}
        except Exception as err:  # noqa: BLE001 - TVM's verdict is whatever it raises
            text = str(err)
            where = LOCATION.search(text)
            kind = "well_formed" if "not well-formed" in text else "parse"
            answer = {"ok": False, "line": int(where.group(1)) if where else None, "kind": kind,
                      "message": (text.strip().splitlines() or [type(err).__name__])[0][:200]}
        print(json.dumps(answer), flush=True)


class TvmVerdicts:
    """The child process, restarted after a timeout or a crash."""

    def __init__(self, timeout: float):
        self.timeout, self.proc, self.crashes = timeout, None, 0

    def ask(self, item: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, __file__, "--tvm-child"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         env={**os.environ, "TVM_NUM_THREADS": "1"})
        payload = {k: item[k] for k in ("text", "first_line", "aliases", "constants", "check_well_formed")}
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.crashes += 1
            return {"ok": False, "line": None, "kind": "timeout" if not ready else "crash", "message": "no answer"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- comparison

def asight_verdict(item: dict, worker: WorkerClient) -> dict:
    result = check_text(item["text"], "item.py", worker)
    errors = [d for d in result.diagnostics if d["severity"] == "error"]
    return {"ok": not errors, "lines": sorted({d["range"]["start"]["line"] + 1 for d in errors}),
            "first": errors[0]["message"] if errors else "", "source": errors[0]["source"] if errors else "",
            "units": len(result.outline.units)}


def compare(tvm_says: dict, ours: dict, item_first: int) -> str | None:
    """None when they agree, else the reason."""
    if ours["units"] != 1:
        return "ASight found no unit"
    if tvm_says["ok"] and ours["ok"]:
        return None
    if tvm_says["ok"]:
        return f"refused by ASight, parsed by TVM: {reason(ours['first'])}"
    if ours["ok"]:
        return f"parsed by ASight, refused by TVM: {tvm_says['kind']}"
    line = tvm_says.get("line")
    if line is not None and line < item_first:  # TVM placed it before the unit: ASight puts it on the unit
        line = item_first
    if tvm_says["kind"] == "well_formed" or line in ours["lines"]:
        return None
    return f"both refuse, other line ({ours['source']}): {reason(ours['first'])}"


def reason(message: str) -> str:
    """A message with its particular names and values masked, for grouping."""
    message = message.split(";")[0]
    message = re.sub(r"'[^']*'", "'…'", message)
    message = re.sub(r"`[^`]*`", "`…`", message)
    return re.sub(r"\d+", "N", message)[:110]


def run(items: list[dict], timeout: float, show: int) -> dict:
    worker, tvm_side = WorkerClient(default_timeout=timeout), TvmVerdicts(timeout)
    apart, agree, crashes, reasons, examples = 0, 0, 0, collections.Counter(), collections.defaultdict(list)
    verdicts = collections.Counter()
    started = time.perf_counter()
    try:
        for n, item in enumerate(items, 1):
            if item["needs_module"]:
                apart += 1
                continue
            tvm_says = tvm_side.ask(item)
            try:
                ours = asight_verdict(item, worker)
            except Exception as err:  # noqa: BLE001 - a crash is a finding
                crashes += 1
                reasons[f"ASight crashed: {type(err).__name__}"] += 1
                examples[f"ASight crashed: {type(err).__name__}"].append(f"{item['id']}: {err}")
                continue
            verdicts["TVM parsed" if tvm_says["ok"] else "TVM refused"] += 1
            verdicts["refused statically by the gate"] += ours["source"] in ("safety", "metadata")
            why = compare(tvm_says, ours, item["first_line"])
            if why is None:
                agree += 1
            else:
                reasons[why] += 1
                if len(examples[why]) < show:
                    examples[why].append(f"{item['id']}: TVM {tvm_says.get('line')} {tvm_says.get('message', '')[:90]}"
                                         f" | ASight {ours['lines']} {ours['first'][:140]}")
            if n % 200 == 0:
                print(f"  {n}/{len(items)} items, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        tvm_side.close()
        worker.close()
    compared = len(items) - apart - crashes
    return {"items": len(items), "apart": apart, "compared": compared, "agree": agree,
            "agreement_pct": round(100.0 * agree / max(compared, 1), 2), "asight_crashes": crashes,
            "worker_restarts": worker.restarts, "tvm_no_answer": tvm_side.crashes,
            "seconds": round(time.perf_counter() - started, 1), "verdicts": dict(verdicts),
            "disagreements": dict(reasons.most_common()), "examples": dict(examples)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", default=MIRROR)
    parser.add_argument("--limit", type=int, default=0, help="at most this many items")
    parser.add_argument("--match", default="", help="only test files whose path contains this")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per item and side")
    parser.add_argument("--show", type=int, default=3, help="examples per disagreement reason")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--nested", action="store_true",
                        help="also the units defined inside test functions (beyond the issue's corpus)")
    parser.add_argument("--tvm-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tvm_child:
        tvm_child()
        return 0
    items = [i for p in test_files(args.repo) if args.match in p
             for i in items_of(p, read(args.repo, p), args.nested)]
    items = items[:args.limit] if args.limit else items
    print(f"load before: {os.getloadavg()[0]:.2f} (1-min average, {os.cpu_count()} CPUs)")
    figures = run(items, args.timeout, args.show)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    print(f"items {figures['items']}: {figures['apart']} need their test module's globals (counted apart), "
          f"{figures['compared']} compared")
    print(f"agreement {figures['agreement_pct']} % ({figures['agree']}/{figures['compared']}), "
          f"ASight crashes {figures['asight_crashes']}, worker restarts {figures['worker_restarts']}, "
          f"TVM timeouts/crashes {figures['tvm_no_answer']}, {figures['seconds']} s, "
          f"load after {figures['load_after']:.2f}")
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in figures["verdicts"].items()))
    for why, count in figures["disagreements"].items():
        print(f"{count:6d}  {why}")
        for example in figures["examples"].get(why, []):
            print(f"          {example}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
