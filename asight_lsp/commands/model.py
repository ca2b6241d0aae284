"""``asight model FILE [--run R]``: per task of a tuned model, its calls with their bindings and
lines, untuned and tuned latency, share of the tuned kernel time, trials and failures."""
from __future__ import annotations

from .common import add_file_run_options, show


def add_parser(sub):
    p = sub.add_parser("model", help="per task of a tuned Relax model: calls, latency, share, trials")
    add_file_run_options(p, "the asight.model/1 payload")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    from ..services.profiling import profile_file
    from ..services.levers import run_extra
    from ..views.model import model_view
    from ..store.caches import archived_profiles
    from ..store.runs import Run
    with WorkerClient(args.python, default_timeout=3600) as worker:
        profile = profile_file(args.file, args.func, args.run_ref, args.work_dir, worker)
    run_dir = (profile.get("run") or {}).get("dir")
    kept = [e["profile"] for e in archived_profiles(Run(run_dir))] if run_dir else []
    return show(model_view(profile, profile.get("run"), kept, tuning=run_extra(profile.get("run"), args.work_dir)),
                args.json, render)


def _us(value) -> str:
    return "-" if value is None else f"{value / 1e3:.2f} ms" if value >= 1e3 else f"{value:.1f} us"


def render(p: dict) -> str:
    head = p["headline"]
    build = head.get("build") or {}
    lines = [f"model {p['function']}: untuned {_us(head['untunedUs'])} -> tuned {_us(head['tunedUs'])} end to end"
             + (f" ({head['speedup']:.2f}x)" if head.get("speedup") else ""),
             *([f"build: {'!!! ' if build.get('stale') else ''}{build['text']}"] if build.get("text") else []),
             f"{'task':<34} {'calls':>5} {'untuned':>10} {'tuned':>10} {'share':>6} {'trials':>6} {'failed':>6}"]
    for t in p["tasks"]:
        share = f"{t['share'] * 100:.0f}%" if t["share"] is not None else "-"
        lines.append(f"{t['task']:<34} {len(t['calls']):>5} {_us(t['untunedUs']):>10} {_us(t['tunedUs']):>10} "
                     f"{share:>6} {t['trials'] if t['trials'] is not None else '-':>6} "
                     f"{t['failed'] if t['failed'] is not None else '-':>6}"
                     + _verdict(t))
        for c in t["calls"]:
            where = f"lines {c['lines'][0] + 1}-{c['lines'][1] + 1}" if c.get("lines") else "lines ?"
            lines.append(f"    #{c['call']}: {', '.join(c['bindings'])} ({where}) {_us(c['tunedUs'])}")
    lines += twin_lines(p)
    if p.get("notTimed"):
        lines.append(f"not timed as kernels (VM builtins or folded): {', '.join(p['notTimed'])}")
    if (p.get("measurement") or {}).get("text"):
        lines.append(p["measurement"]["text"])
    lines += [f"note: {n}" for n in p["notes"]]
    return "\n".join(lines) + "\n"


def _verdict(t: dict) -> str:
    if t.get("defaultKept"):
        kept = t["defaultKept"]
        return (f"  default schedule kept ({_us(kept['defaultUs'])} vs best trial {_us(kept['bestTrialUs'])}, "
                f"re-measured)")
    return "  SLOWER than untuned" if t.get("slower") else "  untuned (no trial)" if t["trials"] == 0 else ""


def twin_lines(p: dict) -> list[str]:
    """Which tasks are twins (or siblings) and what the transferred schedules gave."""
    out = []
    for t in p["tasks"]:
        line = twin_describe(t["task"], t["twins"]) if t.get("twins") else None
        if line:
            out.append(f"  {line}")
    return (["twins (same computation, other epilogue) and siblings (same operator, other shapes):"] + out) if out else []


def twin_describe(task: str, entry: dict) -> str | None:
    from ..analysis.twins import describe
    return describe(task, entry)
