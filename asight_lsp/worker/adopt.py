"""Which workload of a MetaSchedule database tuned elsewhere is a source function (``asight adopt``).

A work folder tuned on another machine (a GPU box, a cluster, a script) names its workloads by
structural hash of the module MetaSchedule tuned.  The function parsed from the user's source is
matched by hash in each form a run may have tuned (``records.workload_forms``); failing that, by its
IR: each workload's PrimFunc compared structurally with the function, attributes left out (a script
may tune ``tir.noalias`` or a ``global_symbol`` the source does not carry).  Only TVM's IR is used:
no device, no build.
"""
from __future__ import annotations

from pathlib import Path

from ..engine import wire
from ..store.runs import read_json_lines
from .compat import ms, tirx, tvm, tvm_ffi
from .parse import parse_request
from .programs import estimate_flops
from .records import read_trials, workload_forms

MAX_BAD_SHOWN = 3


def _function(parsed, member: str | None):
    if isinstance(parsed, tirx.PrimFunc):
        return parsed
    funcs = {gv.name_hint: f for gv, f in parsed.functions_items() if isinstance(f, tirx.PrimFunc)}
    if member and member in funcs:
        return funcs[member]
    if len(funcs) == 1:
        return next(iter(funcs.values()))
    raise ValueError(f"pick one PrimFunc of the unit ({', '.join(sorted(funcs))})")


def _bare(func):
    """The PrimFunc without attributes (the IR comparison ignores them)."""
    return tirx.PrimFunc(func.params, func.body, func.ret_type, None)


def _same_ir(workload_mod, func) -> bool:
    mine = _bare(func)
    for _, other in workload_mod.functions_items():
        if isinstance(other, tirx.PrimFunc) and tvm_ffi.structural_equal(_bare(other), mine, map_free_vars=True):
            return True
    return False


def match(params: dict, emit=None, off=None) -> dict:
    """``{workload: index | None, how, hashes, bad, flops, dtypes}`` for the unit's function in
    ``work_dir``'s database; ``bad``: records TVM cannot load (``unloadable``); ``flops`` and the
    buffers' ``dtypes``: what a claimed latency is checked against (``analysis.gpu_peak``)."""
    func = _function(parse_request(params), params.get("member"))
    found = _match(func, params)
    if found["workload"] is not None:
        found["also"] = _copies(func, params, found["workload"], found["hashes"])
    return {**found, "bad": unloadable(params["work_dir"]) if found["workload"] is not None else None,
            "flops": estimate_flops(tvm.IRModule({"main": func})), "dtypes": sorted({str(p.dtype) for p in func.params})}


def unloadable(work_dir: str) -> dict:
    """``{count, first: [{line, why}]}``: records whose trace TVM cannot replay on their workload (an
    impossible decision, another program's trace).  TVM's database loader refuses the whole folder
    over one of them, so every view of every candidate would fail on it."""
    trials = read_trials(work_dir)
    first, count = [], 0
    for trial in range(len(trials.rows)):
        try:
            trials.record(trial)
        except Exception as err:  # noqa: BLE001 - TVM's check failures: the last line says what failed
            count += 1
            if len(first) < MAX_BAD_SHOWN:
                first.append({"line": trial + 1, "why": _why(err)})
    return {"count": count, "first": first}


def _why(err: Exception) -> str:
    """The last line of TVM's message (its check), or what the error type means when TVM rendered none."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip() and line.strip() != "(not rendered)"]
    if lines:
        return lines[-1][:200]
    return f"{type(err).__name__}: a schedule step does not apply to this workload"


def _copies(func, params: dict, index: int, ours: list[str]) -> list[int]:
    """Other workload lines that are the same function (another hash string: a TVM whose structural
    hash differs tuned into the folder too), whose records the code view would read unchecked."""
    rows = [row for row in read_json_lines(Path(params["work_dir"]) / "database_workload.json")]
    found = []
    for other, row in enumerate(rows):
        if other == index:
            continue
        if isinstance(row, list) and row and str(row[0]) in ours:
            found.append(other)
            continue
        try:
            workload = ms.database.Workload.from_json(row)
        except Exception:  # noqa: BLE001 - an unreadable workload is no copy
            continue
        if _same_ir(workload.mod, func):
            found.append(other)
    return found


def _match(func, params: dict) -> dict:
    rows = [row for row in read_json_lines(Path(params["work_dir"]) / "database_workload.json")]
    ours = [str(tvm_ffi.structural_hash(mod)) for mod in workload_forms(func)]
    for index, row in enumerate(rows):
        if isinstance(row, list) and row and str(row[0]) in ours:
            return {"workload": index, "how": "structural hash", "hashes": ours}
    for index, row in enumerate(rows):
        try:
            workload = ms.database.Workload.from_json(row)
        except Exception:  # noqa: BLE001 - an unreadable workload cannot match
            continue
        if _same_ir(workload.mod, func):
            return {"workload": index, "how": "same IR (attributes aside)", "hashes": ours}
    return {"workload": None, "how": f"no workload of the {len(rows)} in the database is this function",
            "hashes": ours}


HANDLERS = {wire.ADOPT_MATCH: match}
