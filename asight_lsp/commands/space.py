"""``asight space --run R [--json | --png OUT]``: the honeycomb of a run's candidates with its contour.

Feature vectors missing from the run's ``features.msgpack`` are extracted through the TVM worker
first (``--no-extract`` skips that and lays out the sampled decisions instead).  The helpers here
(``add_run_options``, ``load``) are shared by ``loops``, ``principles`` and ``report``.
"""
from __future__ import annotations

import sys

from ..errors import AsightError
from .common import print_json


def add_run_options(p, run_required: bool = False) -> None:
    p.add_argument("--run", dest="run_ref", default=None if run_required else "latest", required=run_required,
                   help="run id, id prefix, run directory or 'latest' (default: latest)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--no-extract", action="store_true",
                   help="do not start the TVM worker to extract feature vectors (use what is cached)")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    p.add_argument("--task", help="a model's task to show (default: the one taking most of the tuned time)")


def load(args, text: str | None = None):
    """The run's ``RunData``; feature extraction notes go to stderr."""
    from ..services.run_data import load_run
    from ..engine.client import WorkerClient
    if args.no_extract:
        data = load_run(args.run_ref, args.work_dir, extract=False, text=text, task=args.task)
    else:
        with WorkerClient(args.python, default_timeout=600) as worker:
            data = load_run(args.run_ref, args.work_dir, worker=worker, text=text, task=args.task)
    for note in data.notes:
        print(f"asight: note: {note}", file=sys.stderr)
    return data


def add_parser(sub):
    p = sub.add_parser("space", help="honeycomb + contour payload of a run's candidates (or a PNG)")
    add_run_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the asight.searchSpace/1 payload")
    out.add_argument("--png", metavar="OUT", help="draw the honeycomb into a PNG file")
    p.add_argument("--seed", type=int, default=0, help="seed of the layout (same seed -> same layout)")
    return p


def run(args) -> int:
    from ..services.run_data import warm_imports
    from ..views.searchspace import search_space
    warm_imports()
    payload = search_space(load(args), seed=args.seed)
    if payload["status"] != "ok":
        raise AsightError(payload["message"])
    if args.json:
        print_json(payload)
    elif args.png:
        from ..views.render import render_search_space
        try:
            render_search_space(payload, args.png)
        except OSError as err:
            raise AsightError(f"cannot write {args.png}: {err.strerror}") from None
        print(args.png)
    else:
        sys.stdout.write(render(payload))
    return 0


def _best_how(best: dict) -> str:
    if best.get("measured_us") is not None:
        return f"chosen by re-measurement: {best['measured_us']:.1f} µs; {best['latency_us']:.1f} µs while tuning"
    return f"fastest while tuning: {best['latency_us']:.1f} µs"


def render(p: dict) -> str:
    run, best = p["run"], p["best"]
    cats = {c["id"]: c["label"] for c in p["categories"]}
    task = f" task {run['task']}" if run.get("task") else ""
    lines = [f"search space of {run['function']}{task} (run {run['id']}): {run['measured']} measured, "
             f"{run['failed']} failed",
             f"features: {p['features']['source']} ({p['features']['dims_used']} varying of {p['features']['dims']})",
             f"layout: {p['reduction']['method'].upper()} -> k={p['clustering']['k']} clusters "
             f"({p['clustering']['criterion']}) -> {len(p['cells'])} hex cells of up to {p['hex']['capacity']}",
             f"best: trial {best['trial']} ({_best_how(best)}) in cell {best['cell']} ({cats[best['category']]})"]
    lines.append("categories (sketch of origin):")
    for c in p["categories"]:
        lines.append(f"  {c['id']}: {c['label']}  ({c['count']} candidates)")
    contour = p["contour"]
    if contour.get("lines"):
        winners = {}
        for cell in p["cells"]:
            if cell.get("winner"):
                winners[cell["winner"]] = winners.get(cell["winner"], 0) + 1
        lines.append(f"contour: {len(contour['lines'])} line pieces at levels {contour['levels']} ({contour['unit']}); "
                     f"cells won by " + ", ".join(f"{k} {v}" for k, v in sorted(winners.items(), key=lambda kv: -kv[1])))
        for c in contour["categories"]:
            lines.append(f"  {c['id']}: {c['source']}")
    elif contour.get("note"):
        lines.append(f"contour: {contour['note']}")
    origin = contour.get("origin") or {}
    if origin.get("origin") == "model" and origin.get("why"):
        lines.append(f"contour is the model, not a measurement: {origin['why']}")
    agreement = contour.get("agreement")
    if agreement:
        lines.append(f"contour model vs measurement: {'' if agreement['verdict'] == 'agrees' else '⚠ '}"
                     f"{agreement['message']}")
    lines += [line for line in contour.get("legend") or [] if line.startswith("⚠ ") and "goes against speed" in line]
    top = sorted(p["cells"], key=lambda c: c["mean_latency_us"])[:5]
    lines.append("fastest cells:")
    for c in top:
        lines.append(f"  cell {c['id']:>3} ({c['q']},{c['r']}): {c['count']:>3} candidates, mean {c['mean_latency_us']:.1f} µs, "
                     f"{cats[c['category']]}")
    return "\n".join(lines) + "\n"
