"""``asight report FILE --run R -o OUT.html``: one self-contained HTML report of a run.

Sections: hotspots (when ``asight_lsp.analysis.hotspot_ranking`` is available: it profiles the tuned
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


def build_report(file: str, run_ref: str, store_root: str | None = None, worker=None, text: str | None = None,
                 hotspots: bool = True, seed: int = 0) -> str:
    """The report page of a run.  Without a worker: cached features only, no hotspots."""
    from ..views import loop_view, principles, search_space, stage_graph
    from ..views.context import load_run
    from ..views.report import report_html
    text = read_source(file).decode("utf-8", errors="replace") if text is None else text
    data = load_run(run_ref, store_root, worker=worker, extract=worker is not None, text=text)
    for note in data.notes:
        print(f"asight: note: {note}", file=sys.stderr)
    payloads = {"searchSpace": search_space(data, seed=seed), "loopView": loop_view(data),
                "stageGraph": stage_graph(data), "principles": principles(data, seed=seed)}
    hot, hot_error = None, None
    if hotspots and importlib.util.find_spec("asight_lsp.analysis.hotspot_ranking") is not None:
        if worker is None:
            hot_error = "the TVM worker was not started (--no-extract)"
        else:
            from .hotspots import collect
            try:
                hot = collect(file, str(data.run.path), None, store_root, worker, text=text)
            except (AsightError, WorkerError) as err:
                hot_error = str(err)
    from ..services.guidance import compare_with_plain
    from ..store.runs import RunStore
    guided = compare_with_plain(RunStore(data.run.path.parent.parent), data.run) if data.run.load().guided_by else None
    return report_html(payloads, best_schedule(data), hot, hot_error, guided=guided)


def write_report(file: str, run_ref: str, output: str | os.PathLike, store_root: str | None = None, worker=None,
                 hotspots: bool = True, seed: int = 0) -> Path:
    """Build the report and write it atomically to ``output`` (what ``asight demo`` can call)."""
    page = build_report(file, run_ref, store_root, worker, hotspots=hotspots, seed=seed)
    out = Path(output)
    try:
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as err:
        raise AsightError(f"cannot write {output}: {err.strerror}") from None
    return out


def run(args) -> int:
    from ..engine.client import WorkerClient
    read_source(args.file)  # a missing file is a one-line error before anything starts
    if args.no_extract:
        out = write_report(args.file, args.run_ref, args.output, args.work_dir, None, not args.no_hotspots, args.seed)
    else:
        with WorkerClient(args.python, default_timeout=600) as worker:
            out = write_report(args.file, args.run_ref, args.output, args.work_dir, worker, not args.no_hotspots,
                               args.seed)
    print(out)
    return 0
