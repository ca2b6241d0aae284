"""``asight.principles/1``: ranked design principles of a run, each with its search constraint."""
from __future__ import annotations

from ..analysis.principle_mining import describe, mine
from ..analysis.vectors import decision_columns
from .context import RunData, clean, run_info

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
    for p in result["principles"] + result["tentative"]:
        col = columns[p["key"]]
        what, rng = describe(col, p["op"], p["value"], _iter_kinds(data, p["block"]))
        where = f" in block {p['block']}" if p["block"] and p["block"] != "root" else ""
        p["decision"] = what
        p["range"] = rng
        p["text"] = (f"{what} {rng}{where}: {p['effect'] * 100:+.0f}% median latency "
                     f"(95% CI {p['ci95'][0] * 100:+.0f}%..{p['ci95'][1] * 100:+.0f}%), n={p['n_in']} of {p['n']}")
    return clean({**base, "status": "ok", **result,
                  "constraints": [p["constraint"] for p in result["principles"]],
                  "meaning": "effect = median latency of the candidates inside the range / outside - 1; "
                             "negative = faster"})
