"""Which model-tuning levers are on (issue 21; docs/models.md "Levers"): every lever is on unless
``ASIGHT_LEVERS_OFF`` (a comma list) names it, for ``bench/model_levers.py``'s ablation.

* ``twins``: a twin's or sibling's best schedule replayed onto a task (``worker/twins.py``);
* ``budget``: the share scheduler (``analysis/budget.py``);
* ``default``: the default schedule as a candidate in the re-measurement (``default_candidate.py``);
* ``layout``: the weight prepack (``prepacks``): weights marked layout-free, so a CPU schedule stores
  them in the layout its loops read, packed once at build time.
"""
from __future__ import annotations

LEVERS = ("twins", "budget", "default", "layout")
LEVERS_OFF_ENV = "ASIGHT_LEVERS_OFF"
PREPACK_KINDS = ("llvm", "c")   # CPU targets; a GPU schedule keeps the weights' layout (DLight fallback)


def levers_off(value: str | None) -> set[str]:
    """The levers an ``ASIGHT_LEVERS_OFF`` value switches off; an unknown name is an error (a typo
    would otherwise run an ablation with every lever on)."""
    names = {x.strip() for x in (value or "").split(",") if x.strip()}
    unknown = names - set(LEVERS)
    if unknown:
        raise ValueError(f"{LEVERS_OFF_ENV}: unknown lever(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(LEVERS)}")
    return names


def prepacks(target_kind: str, off: set[str]) -> bool:
    """Whether a build for a target of this kind packs weights into the tuned schedules' layouts."""
    return target_kind in PREPACK_KINDS and "layout" not in off
