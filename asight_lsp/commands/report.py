"""``asight report FILE --run R -o OUT.html``: one self-contained HTML report of a run.

Sections: hotspots (when ``asight_lsp.analysis.hotspots`` is available: it profiles the tuned
program through the worker; ``--no-hotspots`` skips it), search space (honeycomb + contours),
loop view, stage graph, design principles and the best schedule.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from ..errors import AsightError, WorkerError
from .common import read_source
from .space import add_run_options


def add_parser(sub):
    p = sub.add_parser("report", help="one self-contained HTML report of a run (all views)")
    p.add_argument("file", help="the TVMScript file the run tuned")
    add_run_options(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.html", help="where to write the report")
    p.add_argument("--no-hotspots", action="store_true", help="skip the hotspots section (no profiling)")
    p.add_argument("--seed", type=int, default=0)
    return p


def best_schedule(data) -> dict | None:
    """The best candidate: trial, latency, per-block steps and its trace as text."""
    from ..analysis.traces import format_trace
    from ..views.loops import best_summary
    best = data.table.best_index()
    if best is None:
        return None
    rec = data.table.records[best]
    steps = {name: s.get("steps", []) for name, s in best_summary(data).items()}
    return {"trial": int(rec["trial"]), "latency_us": rec["latency_us"], "steps": steps,
            "trace": format_trace(rec["insts"], rec["decisions"])}


def build_report(args, text: str, worker=None) -> str:
    from ..views import loop_view, principles, search_space, stage_graph
    from ..views.context import load_run
    from ..views.report import report_html
    data = load_run(args.run_ref, args.work_dir, worker=worker, extract=worker is not None, text=text)
    for note in data.notes:
        print(f"asight: note: {note}", file=sys.stderr)
    payloads = {"searchSpace": search_space(data, seed=args.seed), "loopView": loop_view(data),
                "stageGraph": stage_graph(data), "principles": principles(data, seed=args.seed)}
    hot, hot_error = None, None
    if importlib.util.find_spec("asight_lsp.analysis.hotspots") is not None and not args.no_hotspots:
        if worker is None:
            hot_error = "the TVM worker was not started (--no-extract)"
        else:
            from .hotspots import collect
            try:
                hot = collect(args.file, str(data.run.path), None, args.work_dir, worker, text=text)
            except (AsightError, WorkerError) as err:
                hot_error = str(err)
    return report_html(payloads, best_schedule(data), hot, hot_error)


def run(args) -> int:
    from ..workerclient import WorkerClient
    text = read_source(args.file).decode("utf-8", errors="replace")
    if args.no_extract:
        page = build_report(args, text)
    else:
        with WorkerClient(args.python, default_timeout=600) as worker:
            page = build_report(args, text, worker)
    out = Path(args.output)
    try:
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as err:
        raise AsightError(f"cannot write {args.output}: {err.strerror}") from None
    print(out)
    return 0
