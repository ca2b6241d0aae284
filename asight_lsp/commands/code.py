"""``asight code FILE [--run R] [--candidate K] [--level L] [--func F] [--diff K2 | --diff-run R2] [--json]``.

Prints a function's generated code (scheduled TVMScript, lowered TIR, LLVM IR or assembly) with
the source line each generated line came from, and the latency share of its block where the run
has a profile.  ``--diff K2`` compares candidate K (default: the best) with candidate K2 of the
same run; ``--diff-run R2`` compares with the best record of run R2.  See docs/codeview.md.
"""
from __future__ import annotations

import sys

from ..services.codeview import LEVELS, code_diff, code_view
from ..errors import AsightError
from .common import print_json, read_source


def add_parser(sub):
    p = sub.add_parser("code", help="generated code (scheduled/lowered/llvm/asm) linked to the source lines")
    p.add_argument("file")
    p.add_argument("--run", dest="run_ref", help="run id, id prefix, run directory or 'latest' "
                                                 "(default: the newest run of the function; none: untuned)")
    p.add_argument("--candidate", type=int, help="trial index in the run (default: the best record)")
    p.add_argument("--level", choices=LEVELS, default="scheduled")
    p.add_argument("--func", help="function id/name (default: the only unit)")
    p.add_argument("--task", help="a Relax model's kernel to show (its task name, e.g. fused_conv2d_add_relu)")
    p.add_argument("--serial", action="store_true",
                   help="drop the schedule's Parallel instructions (assembly of parallel loops has no line info)")
    p.add_argument("--diff", type=int, metavar="K2", help="compare with candidate K2 of the same run")
    p.add_argument("--diff-run", metavar="R2", help="compare with the best record of run R2")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--json", action="store_true", help="machine-readable output (text + links)")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    text = read_source(args.file).decode("utf-8", errors="replace")
    if args.candidate is not None and args.candidate < 0:
        raise AsightError(f"--candidate must be a trial index >= 0, not {args.candidate}")
    diffing = args.diff is not None or args.diff_run is not None
    if diffing and args.level != "scheduled":
        raise AsightError("--diff compares scheduled code; drop --level")
    if diffing and args.run_ref is None:
        raise AsightError("--diff needs --run R")
    with WorkerClient(args.python) as worker:
        if diffing:
            other = {"run": args.diff_run or args.run_ref, "candidate": args.diff}
            result = code_diff(args.file, {"run": args.run_ref, "candidate": args.candidate}, other, args.func,
                               args.work_dir, worker, text=text)
        else:
            result = code_view(args.file, args.run_ref, args.candidate, args.level, args.func, args.work_dir,
                               worker, text=text, serial=args.serial, task=args.task)
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(render_diff(result) if diffing else render(result))
    return 0


def _share(link: dict | None, key: str = "share") -> str:
    return f"{link[key] * 100:5.1f}%" if link and link.get(key) is not None else "      "


def render(result: dict) -> str:
    cand = result.get("candidate") or {}
    what = (f"trial {cand['trial']}" if cand.get("trial") is not None else
            "DLight's default schedule, kept" if cand.get("kept") == "dlight" else "best record") if cand else "untuned"
    lat = f", {cand['latencyUs']:.1f} µs" if cand.get("latencyUs") else ""
    if cand.get("trial") is not None and cand.get("latencyUs") is None:
        lat = ": failed where it was tuned, no latency"      # said at the top, not only in the note at the end
    name = f"task {result['task']} of {result['function']}" if result.get("task") else result["function"]
    head = [f"# {result['level']} code of {name} ({result['run'] or 'no run'}, {what}{lat})",
            "# src  share" + (" instr" if result.get("lineShareSource") else "") + " | generated"]
    for k, site in enumerate(result.get("callSites") or []):
        lines = site["lines"]
        where = f"lines {lines[0]}-{lines[-1]}" if lines else "lines unknown"
        head.insert(1 + k, f"# call #{site['call']}: bindings {', '.join(site['vars'])} ({where})")
    links = {link["line"]: link for link in result["links"]}
    instr = bool(result.get("lineShareSource"))
    body = []
    for number, line in enumerate(result["text"].splitlines()):
        link = links.get(number)
        src = f"{link['sourceLine'] + 1:>5}" if link else "     "
        extra = f" {_share(link, 'lineShare')}" if instr else ""
        body.append(f"{src} {_share(link)}{extra} | {line}")
    tail = [f"# note: {result['note']}"] if result.get("note") else []
    tail += [f"# {label}: {result[key]}" for label, key in (("share", "shareSource"), ("instr", "lineShareSource"))
             if result.get(key)]
    return "\n".join(head + body + tail) + "\n"


def _latency(us: float | None) -> str:
    return f"{us:.1f} µs" if us is not None else "none"


def render_diff(result: dict) -> str:
    a, b = result["sides"]
    lines = [f"# {result['function']}: {a['label']} vs {b['label']}"]
    la, lb = result["latencyUs"]
    if la is not None and lb is not None:
        lines.append(f"latency: {la:.1f} µs -> {lb:.1f} µs ({result['deltaUs']:+.1f} µs, x{result['ratio']:.2f})")
    elif la is not None or lb is not None:
        lines.append(f"latency: {_latency(la)} -> {_latency(lb)} (one side has no measured latency)")
    lines.append(f"decisions that differ ({len(result['decisions'])}):")
    for d in result["decisions"]:
        where = d["block"] or "?"
        what = d["loopVar"] or d["annotation"] or d["inst"]
        lines.append(f"  {where} {d['inst']} {what}: {d['a']} -> {d['b']}")
    lines += ["", "trace diff:", result["traceDiff"] or "(same trace)", "", "scheduled code diff:",
              result["codeDiff"] or "(same code)"]
    return "\n".join(lines) + "\n"
