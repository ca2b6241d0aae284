"""``asight report FILE --run R -o OUT.html``: one self-contained HTML report of a run.

What it holds: ``services/report.py`` (``--no-hotspots`` skips the section that profiles).
"""
from __future__ import annotations

from ..services.report import write_report
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


def run(args) -> int:
    from ..engine.client import WorkerClient
    read_source(args.file)  # a missing file is a one-line error before anything starts
    if args.no_extract:
        out = write_report(args.file, args.run_ref, args.output, args.work_dir, None, not args.no_hotspots, args.seed,
                           task=args.task)
    else:
        with WorkerClient(args.python, default_timeout=600) as worker:
            out = write_report(args.file, args.run_ref, args.output, args.work_dir, worker, not args.no_hotspots,
                               args.seed, task=args.task)
    print(out)
    return 0
