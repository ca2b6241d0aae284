"""``asight demo``: tune a bundled example with a small budget, profile it, say what was found."""
from __future__ import annotations

import importlib
import shutil
import sys
import time
from pathlib import Path

from ..errors import AsightError
from ..jobs import TuneRequest, start_tune
from .common import print_json
from .tune import follow, fmt_us, print_summary, speedup

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT_EXAMPLE = "matmul_bias_relu.py"


def add_parser(sub):
    p = sub.add_parser("demo", help="tune and profile a bundled example (about a minute)")
    p.add_argument("--work-dir", default="asight-demo", help="folder for the example and its runs (default ./asight-demo)")
    p.add_argument("--trials", type=int, default=32, help="tuning budget (default 32)")
    p.add_argument("--example", default=DEFAULT_EXAMPLE, choices=sorted(p.name for p in EXAMPLES.glob("*.py")))
    p.add_argument("--no-profile", action="store_true", help="skip the profile step")
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
    profile = None if args.no_profile else run_profile(job.run, say)
    if quiet:
        print_json({"example": str(source), "run": meta.id, "run_dir": str(job.run.path), "trials": meta.trials_done,
                    "baseline_us": meta.baseline_us, "best_us": meta.best_us, "speedup": speedup(meta),
                    "profile": profile})
        return 0
    print()
    print("next:")
    print(f"  asight profile {source} --run {meta.id}")
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


def run_profile(run, say) -> dict | None:
    """Profile the run when the profile feature is installed (``asight_lsp.profiles``); else skip."""
    try:
        profiles = importlib.import_module("asight_lsp.profiles")
    except ModuleNotFoundError:
        say("(profiling is not available in this build; skipped)")
        return None
    from ..workerclient import WorkerClient
    say("profiling untuned vs best (per block) ...")
    with WorkerClient() as worker:
        profile = profiles.profile_run(run, worker)
    try:
        render = importlib.import_module("asight_lsp.commands.profile").render
        say(render(profile))
    except (ModuleNotFoundError, AttributeError):
        say(_fallback_render(profile))
    return profile


def _fallback_render(profile: dict) -> str:
    summary = profile.get("summary") or {}
    return (f"profile: untuned {fmt_us(summary.get('baseline_us'))}, tuned {fmt_us(summary.get('tuned_us'))}"
            f", outputs match: {summary.get('check_ok')}")
