"""``asight hotspots FILE --run R``: source blocks (TIR) or bindings (Relax) ranked by tuned latency.

How they are found: ``services/hotspots.py``.
"""
from __future__ import annotations

import sys

from ..services.hotspots import collect
from ..views.text import format_latency, slowed_lines
from .common import print_json


def add_parser(sub):
    p = sub.add_parser("hotspots", help="source blocks/bindings ranked by tuned latency, with ranges and evidence")
    p.add_argument("file")
    p.add_argument("--run", dest="run_ref", required=True, help="run id, id prefix, run directory, or 'latest': the run "
                   "shown for the file's function (as `asight runs FILE` says)")
    p.add_argument("--func", help="function id/name (default: the function the run tuned)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--no-cache", action="store_true", help="measure again even if the run has a cached profile")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    with WorkerClient(args.python) as worker:
        result = collect(args.file, args.run_ref, args.func, args.work_dir, worker, use_cache=not args.no_cache)
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(render(result))
    return 0


# --------------------------------------------------------------------------- orchestration


# --------------------------------------------------------------------------- human output


def _us(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


def _lines(entry: dict) -> str:
    rng = entry.get("range")
    if rng:
        return f"{rng['start']['line'] + 1}-{rng['end']['line'] + 1}"
    lines = entry.get("lines")
    return f"{lines[0]}-{lines[1]}" if lines else "-"


def _behind(entry: dict) -> str:
    items = entry.get("transformed") or []
    if entry.get("calls") is not None:
        return ", ".join(entry["calls"]) or "-"
    return ", ".join(t["block"] if t["role"] == "compute" else f"{t['block']} ({t['role']})" for t in items) or "-"


def _before_after(entry: dict) -> str:
    """``1.2 µs → 5.5 µs ⚠`` from the profile's per-block figures of both programs (``-`` without them)."""
    change = entry.get("change") or {}
    if change.get("before_us") is None:
        return "-"
    return (f"{format_latency(change['before_us'])} → {format_latency(change.get('after_us'))}"
            + (" ⚠" if change.get("slower") else ""))


def render(result: dict) -> str:
    lines = [f"hotspots of {result['function']} ({result['kind']}), run {result['run']}"]
    for part in result["parts"]:
        if part.get("headline_us"):
            lines.append(f"{part['name']}: {_us(part['headline_us'])} tuned (the run's measurement record); "
                         "each block's share from rdtsc around the stages")
        else:
            lines.append(f"{part['name']}: {_us(part['measured_us'])} summed over the kernel calls (per call, "
                         "VM instrument hook; not the end-to-end latency)")
        lines.append(f"  {'#':>2}  {'source':<16} {'latency':>10} {'share':>6}  {'untuned → tuned':<24} {'lines':<8} "
                     f"{'match':<14} behind it")
        for e in part["entries"]:
            share = f"{e['share'] * 100:5.1f}%" if e.get("share") is not None else "     -"
            split = f" [split by {e['split']}]" if e.get("split") in ("flops", "equal") else ""
            inl = f" [inlined into {e['inlined_into']}]" if e.get("inlined_into") else ""
            lines.append(f"  {e['rank']:>2}  {e['name']:<16} {_us(e['us']):>10} {share}  {_before_after(e):<24} {_lines(e):<8} "
                         f"{e.get('match') or '-':<14} {_behind(e)}{split}{inl}")
        for u in part["unattributed"]:
            where = f"stage {u['stage']} {u['blocks']}" if "stage" in u else f"{u['task']}#{u['call']}"
            lines.append(f"  unattributed: {where}: {_us(u['us'])}")
        lines.extend(f"  {line}" for line in slowed_lines(part.get("changes") or [],
                                                        {c["name"]: c.get("schedule") for c in part.get("changes") or []}))
        if part.get("warning"):
            lines.append(f"  warning: {part['warning']}")
    lines.append(f"note: {result['parts'][0]['split_rule']}" if result["parts"] else "no kernels profiled")
    lines.extend(f"note: {note}" for note in result.get("notes") or [])     # stale, still tuning, kept aside
    return "\n".join(lines) + "\n"
