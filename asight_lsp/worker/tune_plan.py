"""What a tuning job, or a worker request, works with: decided once where it starts, then passed down.

The levers off (``analysis/levers.py``) are a value, never a switch read from a global: every function
that honours a lever takes them as ``off`` (a ``frozenset`` of lever names).  They are decided here:

* ``env_levers``: ``ASIGHT_LEVERS_OFF`` (the ablation's switch, ``bench/model_levers.py``);
* ``run_levers``: a job on a run keeps the pipeline levers the run was made with
  (``levers.run_levers_off``: its run.json record, its workloads when the run predates the record);
* ``request_levers``: a worker request with a ``run_dir`` works with that run's levers, one without
  with the environment's (``worker/__main__._serve`` decides once per request).

``TunePlan`` is a tuning session's plan (``worker/tune_job.py``): the tasks, the target, the design
space and the levers, built once from run.json and the environment, starting from the run's selection
(``parse_selection``; ``InputProblem`` when the source or the request is wrong).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..analysis.levers import LEVERS_OFF_ENV, levers_off, run_levers_off


def env_levers() -> frozenset[str]:
    """The levers ``ASIGHT_LEVERS_OFF`` switches off (all are on without it)."""
    return frozenset(levers_off(os.environ.get(LEVERS_OFF_ENV)))


def run_levers(run_dir: str, now_off: set[str] | frozenset[str]) -> frozenset[str]:
    """``levers.run_levers_off`` for a run directory (its run.json record; its workloads when the run
    predates the record), the other levers as ``now_off``."""
    from ..errors import AsightError
    from ..store.database import workloads_text
    from ..store.record import Levers
    from ..store.runs import Run
    try:
        levers = Levers.from_extra(Run(run_dir).load().extra)
    except (AsightError, OSError):   # a missing, damaged or unreadable run.json: as a run made before the record
        levers = None
    known = list(levers.known) if levers is not None and levers.known is not None else None
    if levers is not None and levers.off is not None:
        return frozenset(run_levers_off(list(levers.off), set(now_off), None, known))
    try:
        workloads = workloads_text(run_dir)
    except OSError:
        workloads = None
    return frozenset(run_levers_off(None, set(now_off), workloads, known))


def request_levers(run_dir: str | None) -> frozenset[str]:
    """The levers a job or request on ``run_dir`` works without: the run's (``run_levers``: its
    kernels as they were tuned), or the environment's without a run directory."""
    now = env_levers()
    return run_levers(run_dir, now) if run_dir else now


def params_levers(params: dict) -> frozenset[str]:
    """``request_levers`` of a worker request (its ``run_dir`` param, when it names one)."""
    run_dir = params.get("run_dir")
    return request_levers(run_dir if isinstance(run_dir, str) else None)


@dataclass(frozen=True)
class TunePlan:
    """What one tuning session works on, decided once when the job starts (``TuningProcess.prepare``):
    ``plan`` (``metaschedule.Plan``: kind, tasks, program, entry) of the selection ``member`` (None:
    the whole unit), for ``target``, searched in the user's design ``space`` (a SpaceGenerator, or None:
    MetaSchedule's), without the levers ``levers_off`` (``request_levers`` of the run)."""
    plan: object
    target: object
    space: object | None
    levers_off: frozenset[str]
    member: str | None = None


class InputProblem(Exception):
    """The source (kind "input": the CLI exits 1) or the request (kind "usage", e.g. an unknown
    target: exit 2) is wrong; the message is one line."""

    def __init__(self, message: str, kind: str = "input"):
        super().__init__(message)
        self.kind = kind


def parse_selection(run, meta, update) -> tuple[object, str | None]:
    """The run's selection parsed from its ``source.py`` (``run``: ``store.runs.Run``, ``meta`` its
    run.json): the unit (PrimFunc or IRModule) and the member function to tune (or None).  A unit
    that does not parse is an ``InputProblem``, located, and kept in run.json (``update``, ``extra.problem``)."""
    from ..tvmscript.outline import build_outline
    from ..tvmscript.pysource import source_lines
    from ..engine.targets import runs_on_device
    from .parse import error_to_problem, parse_unit, require_no_native_calls
    selection = meta.extra.get("selection") or {}
    text = run.source_path.read_text(encoding="utf-8")
    outline = build_outline(text, meta.file)
    unit = next((u for u in outline.units if u.name == selection.get("unit")), None)
    if unit is None:
        raise InputProblem(f"{meta.file}: unit {selection.get('unit')!r} not found")
    spec = {"start_line": unit.start_line, "end_line": unit.end_line}
    try:
        parsed = parse_unit(source_lines(text), spec, outline.constants, outline.aliases)
        # the native-call rule for the run's target: a CPU build may not call device-library names
        require_no_native_calls(parsed, device=runs_on_device(meta.extra.get("target_spec")))
    except Exception as err:  # noqa: BLE001  DiagnosticError, SyntaxError, ... -> a located message
        problem = error_to_problem(err)
        problem["unit"] = unit.name
        update(extra={**run.load().extra, "problem": problem})
        raise InputProblem(f"{meta.file}:{problem['line']}:{problem['col']}: {problem['message']}") from None
    return parsed, selection.get("member")
