"""``asight runs FILE``: which run each function shows, and whether it is valid (no TVM)."""
from __future__ import annotations

from .common import print_json


def add_parser(sub):
    p = sub.add_parser("runs", help="each function's runs: the one shown, and whether it is fresh, stale or "
                                    "shipped (no TVM)")
    p.add_argument("file")
    p.add_argument("--func", help="one function or unit (default: every function of the file)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--json", action="store_true", help="print a list of asight.runs/1 payloads, one per function")
    return p


def run(args) -> int:
    from ..services.lookup import file_runs
    listing = file_runs(args.file, args.func, args.work_dir)
    if args.json:
        print_json(listing)
        return 0
    for entry in listing:
        print(render(entry))
    return 0


def render(entry: dict) -> str:
    """``M.main: run R · fresh · 0.20 ms · 107× vs untuned`` and a line for each other run."""
    runs = {r["id"]: r for r in entry["runs"]}
    shown = runs.get(entry.get("shown"))
    lines = [f"{entry['function']}: " + (_line(shown) if shown else "no run (tune it: asight tune FILE --func F)")]
    lines += [f"  also {_line(r)}" for r in entry["runs"] if r is not shown]
    lines += [f"  ⚠ {note}" for note in entry.get("notes") or []]
    return "\n".join(lines)


def _line(run: dict) -> str:
    parts = [f"run {run['id']}", run.get("status") or run["state"], run.get("headline") or ""]
    parts += run.get("reasons") or []
    if run.get("shipped"):
        parts.append("shipped (read-only)")
    if run.get("movedFrom"):
        parts.append(f"tuned as {run['movedFrom']}")
    parts += [f"not read: {why}" for why in run.get("unread") or []]
    return " · ".join(p for p in parts if p)
