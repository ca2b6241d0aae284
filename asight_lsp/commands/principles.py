"""``asight principles --run R``: sampled decisions that go with lower latency, with constraints."""
from __future__ import annotations

import json

from .common import show
from .space import add_run_options, load


def add_parser(sub):
    p = sub.add_parser("principles", help="design principles of a run (decision ranges with lower latency)")
    add_run_options(p)
    p.add_argument("--json", action="store_true", help="print the asight.principles/1 payload")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the forest")
    return p


def run(args) -> int:
    from ..views.principles import principles
    return show(principles(load(args), seed=args.seed), args.json, render)


def render(p: dict) -> str:
    lines = [f"design principles of {p['run']['function']} (run {p['run']['id']}, {p['n']} measured, "
             f"{p['tested']} ranges tested)"]
    for item in p["principles"]:
        lines.append(f"  {item['rank']}. {item['text']}")
        lines.append(f"     constraint: {json.dumps(item['constraint'])}")
    if not p["principles"]:
        lines.append(f"  none: {p['reason']}")
    model = p.get("model")
    if model:
        top = ", ".join(f"{i['key']} {i['importance']:.2f}" for i in model["importances"][:3])
        lines.append(f"random forest (log latency, OOB R² {model['oob_r2']:.2f}): most important {top}")
    return "\n".join(lines) + "\n"
