"""``asight.principles/1``: ranked design principles of a run, each with its search constraint."""
from __future__ import annotations

import json
import shlex

from .. import protocol as P
from ..analysis.principle_mining import describe, mine
from ..analysis.vectors import decision_columns
from .context import RunData, clean, run_info

SETTLE_LIMIT = 2000   # more trials than this: say the effect is too small to settle by tuning longer

SCHEMA = "asight.principles/1"


def _iter_kinds(data: RunData, block: str | None) -> str | None:
    if data.function is None or block is None:
        return None
    return next((b.iter_kinds for b in data.function.blocks if b.name == block), None)


def principles(data: RunData, seed: int = 0) -> dict:
    """Design principles (see ``analysis.principles``) with a sentence each."""
    base = {"schema": SCHEMA, "run": run_info(data), "notes": list(data.notes), "seed": seed}
    if not data.table.valid.any():
        return {**base, "status": "unavailable", "message": "the run has no measured candidate yet"}
    cols = decision_columns(data.table)
    result = mine(data.table, seed=seed, columns=cols)
    columns = {c.key: c for c in cols}
    for p in result["principles"] + result["tentative"] + result.get("closest", []):
        col = columns[p["key"]]
        what, rng = describe(col, p["op"], p["value"], _iter_kinds(data, p["block"]))
        where = f" in block {p['block']}" if p["block"] and p["block"] != "root" else ""
        p["decision"] = what
        p["range"] = rng
        ci = f"95% CI {p['ci95'][0] * 100:+.0f}%..{p['ci95'][1] * 100:+.0f}%" if "ci95" in p else \
            f"p = {p['p_value']:.2g}, after the FDR correction {p['p_adjusted']:.2g}"
        p["text"] = f"{what} {rng}{where}: {p['effect'] * 100:+.0f}% median latency ({ci}), n={p['n_in']} of {p['n']}"
    for kind in ("principles", "tentative", "closest"):
        for p in result.get(kind, []):
            p["next_step"] = next_step(data, p, kind)
    return clean({**base, "status": "ok", **result,
                  "constraints": [p["constraint"] for p in result["principles"]],
                  "meaning": "effect = median latency of the candidates inside the range / outside - 1; "
                             "negative = faster"})


def next_step(data: RunData, p: dict, kind: str) -> dict:
    """What a user can do with a principle (``kind``: principles / tentative / closest): a sentence,
    the CLI command, and the editor command (``asight.tune`` with its arguments; the client adds the
    document's uri)."""
    meta = data.meta
    base = ["asight", "tune", meta.file or "FILE", "--func", meta.function]
    spec = (getattr(meta, "extra", None) or {}).get("target_spec")   # re-tuned on the same (GPU) target
    target = {"target": spec} if spec else {}
    base += ["--target", spec] if spec else []
    trials = len(data.table)
    # A task of a multi-task module gets a share of the module's budget: the command names the
    # module's trials (scaled from this task's), never this task's count alone.
    run_trials = max(int(meta.trials_done or 0), trials)
    scale = run_trials / trials if data.task and trials else 1.0
    shared = f" of the module's {run_trials} (this task had {trials})" if data.task and trials else ""
    if kind == "closest":
        settle = p.get("settle") or {}
        more = settle.get("more_trials")
        if more is None or more > SETTLE_LIMIT:
            return {"kind": "none", "text": "the effect is too small to settle by tuning longer"
                    + (f" (≈ {more:,} more trials by a rough estimate)" if more else "")}
        total = (run_trials if data.task else trials) + max(int(round(max(more, 1) * scale)), 1)
        return {"kind": "more-trials",
                "text": f"tune about {more:,} more trials of this task to settle it (a rough estimate); "
                        f"--trials {total} in all{shared}" if data.task else
                        f"tune about {more:,} more trials to settle it (a rough estimate)",
                "cli": shlex.join(base + ["--trials", str(total)]),
                "command": {"command": P.CMD_TUNE, "args": {"function": meta.function, "trials": total, **target}}}
    guided = base + ["--guided-by", data.run.id or meta.id, "--trials", str(max(run_trials if data.task else trials, 8))]
    where = " (where that GPU is, or with --rpc)" if data.on_device else ""
    alone = json.dumps([p["constraint"]], separators=(",", ":"))
    tentative = " (as a tentative range, labelled so)" if kind == "tentative" else ""
    return {"kind": "guided-retune",
            "text": f"re-tune steered by this run's principles{tentative}{where}; by this one alone: --principles "
                    f"FILE with its constraint",
            "cli": shlex.join(guided),
            "cli_alone": f"echo {shlex.quote(alone)} > principle.json && {shlex.join(guided + ['--principles', 'principle.json'])}",
            "command": {"command": P.CMD_TUNE, "args": {"function": meta.function, "guidedBy": data.run.id or meta.id,
                                                        **target}}}
