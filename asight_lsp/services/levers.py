"""What the model levers of issue 21 need from the store (TVM-free): a run's ``extra`` (twins and
transfers, the budget's outlook) for the model view."""
from __future__ import annotations

from ..store.runs import RunStore


def run_extra(run: dict | None, store_root: str | None) -> dict | None:
    """run.json ``extra`` of the run a profile measured (None without a run, or when it is gone)."""
    if not run or not run.get("id"):
        return None
    try:
        return RunStore(store_root).get(run["id"]).load().extra
    except Exception:  # noqa: BLE001 - the view shows the profile; the twins section is left out
        return None
