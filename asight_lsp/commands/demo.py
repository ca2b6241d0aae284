"""``asight demo``: tune a bundled example with a small budget, profile it, say what was found."""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from ..errors import AsightError
from ..services.tuning import TuneRequest, start_tune
from .common import print_json
from .tune import follow, print_summary, speedup

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT_EXAMPLE = "matmul_bias_relu.py"


def add_parser(sub):
    p = sub.add_parser("demo", help="tune and profile a bundled example (about a minute)")
    p.add_argument("--work-dir", default="asight-demo", help="folder for the example and its runs (default ./asight-demo)")
    p.add_argument("--trials", type=int, default=32, help="tuning budget (default 32)")
    p.add_argument("--example", default=DEFAULT_EXAMPLE, choices=sorted(p.name for p in EXAMPLES.glob("*.py")))
    p.add_argument("--no-profile", action="store_true", help="skip the profile step")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    return p


def run(args) -> int:
    work = Path(args.work_dir).resolve()
    source = copy_example(args.example, work)
    quiet = args.json
    say = (lambda *a: None) if quiet else print
    say(f"example  {source}")
    started = time.perf_counter()
    job = start_tune(TuneRequest(file=str(source), trials=args.trials, store_root=str(work / ".asight")))
    meta = follow(job, None if quiet else sys.stdout)
    if meta.state != "done":
        raise AsightError(f"the demo's tuning run ended {meta.state}: {meta.error or 'see ' + str(job.run.path)}")
    if not quiet:
        print_summary(job, meta)
        print(f"tuning took {time.perf_counter() - started:.0f} s")
    from ..engine.client import WorkerClient
    with WorkerClient() as worker:
        profile = None if args.no_profile else run_profile(job.run, say, worker)
        report = None if args.no_report else make_report(source, job.run, work, worker, say)
    if quiet:
        print_json({"example": str(source), "run": meta.id, "run_dir": str(job.run.path), "trials": meta.trials_done,
                    "baseline_us": meta.baseline_us, "best_us": meta.best_us, "speedup": speedup(meta),
                    "profile": profile, "report": str(report) if report else None})
        return 0
    print()
    if report:
        print(f"report   {report}")
    print("next:")
    run_dir = job.run.path  # a path works from any folder; the id only where the store is (--work-dir)
    print(f"  asight profile {source} --run {run_dir}")
    print(f"  asight code {source} --run {run_dir} [--level lowered|llvm|asm]   # the generated code, line-linked")
    print(f"  open {work} in VS Code with the ASight extension: lenses, hotspots and the search-space panel")
    print(f"  the run (MetaSchedule's JSON database + run.json) is in {job.run.path}")
    return 0


def copy_example(name: str, work: Path) -> Path:
    """Copy the example into ``work`` (kept if it is already there, so a re-run resumes its run)."""
    src = EXAMPLES / name
    if not src.is_file():
        raise AsightError(f"no bundled example {name!r}")
    work.mkdir(parents=True, exist_ok=True)
    dest = work / name
    if not dest.exists() or dest.read_bytes() != src.read_bytes():
        shutil.copyfile(src, dest)
    return dest


def run_profile(run, say, worker) -> dict:
    """Profile untuned vs best (per block) and print the table."""
    from ..services.profiling import profile_run
    from .profile import render
    say("profiling untuned vs best (per block) ...")
    profile = profile_run(run, worker)
    say(render(profile))
    return profile


def make_report(source: Path, run, work: Path, worker, say) -> Path | None:
    """The self-contained HTML report of the run (hotspots, honeycomb, loop view, principles)."""
    from .report import write_report
    say("writing the report (features, honeycomb, loop view, stage graph, principles, hotspots) ...")
    try:
        return write_report(str(source), str(run.path), work / "asight-report.html", str(work / ".asight"), worker)
    except AsightError as err:  # the tuning and profile results stand; say why the report is missing
        say(f"(no report: {err})")
        return None
