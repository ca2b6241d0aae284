"""``asight check FILE...``: parse and well-formedness diagnostics, every file through one TVM worker."""
from __future__ import annotations

import sys

from ..errors import AsightError
from ..tvmscript.diagnostics import check_text
from ..engine.client import WorkerClient, sandbox_warning
from .common import human_location, print_json, read_source


def add_parser(sub):
    p = sub.add_parser("check", help="diagnostics (syntax, safety gate, TVM parse, well-formedness)")
    p.add_argument("file", nargs="+", help="one or more TVMScript files (one worker checks them all)")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output (several files: a list, one result per file)")
    p.add_argument("--static", action="store_true", help="skip TVM: syntax and safety gate only")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    files = list(dict.fromkeys(args.file))      # a file named twice is checked once
    sources = _readable(files)
    if args.static or not sources:
        results = {f: check_text(data, f) for f, data in sources.items()}
    else:
        with WorkerClient(args.python) as worker:
            results = {f: check_text(data, f, worker) for f, data in sources.items()}
        warning = sandbox_warning(worker.sandbox)
        if warning:
            print(f"asight: warning: {warning}", file=sys.stderr)
    if args.json and results:
        print_json(results[files[0]].to_dict() if len(files) == 1 else
                   [r.to_dict() for r in results.values()])
    else:
        for f, result in results.items():
            _print(f, result)
    if len(sources) < len(files):
        return 2                       # a file that could not be read: usage, as the CLI's other errors
    return 1 if any(r.has_errors for r in results.values()) else 0


def _readable(files: list[str]) -> dict[str, bytes]:
    """Each file's bytes; one that cannot be read is said on stderr (as the CLI says its errors) and the
    others are still checked."""
    sources = {}
    for f in files:
        try:
            sources[f] = read_source(f)
        except AsightError as err:
            print(f"asight: error: {err}", file=sys.stderr)
    return sources


def _print(file: str, result) -> None:
    for diag in result.diagnostics:
        print(f"{human_location(file, diag['range'])}: {diag['severity']}: {diag['message']} [{diag['source']}]")
    if not result.diagnostics:
        print(f"{file}: no problems ({len(result.outline.units)} unit(s) checked)")
