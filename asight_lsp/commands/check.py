"""``asight check FILE``: parse and well-formedness diagnostics."""
from __future__ import annotations

import sys

from ..tvmscript.diagnostics import check_text
from ..engine.client import WorkerClient, sandbox_warning
from .common import human_location, print_json, read_source


def add_parser(sub):
    p = sub.add_parser("check", help="diagnostics (syntax, safety gate, TVM parse, well-formedness)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--static", action="store_true", help="skip TVM: syntax and safety gate only")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    data = read_source(args.file)
    if args.static:
        result = check_text(data, args.file)
    else:
        with WorkerClient(args.python) as worker:
            result = check_text(data, args.file, worker)
        warning = sandbox_warning(worker.sandbox)
        if warning:
            print(f"asight: warning: {warning}", file=sys.stderr)
    if args.json:
        print_json(result.to_dict())
    else:
        for diag in result.diagnostics:
            print(f"{human_location(args.file, diag['range'])}: {diag['severity']}: {diag['message']} [{diag['source']}]")
        if not result.diagnostics:
            print(f"{args.file}: no problems ({len(result.outline.units)} unit(s) checked)")
    return 1 if result.has_errors else 0
