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
from .compat import ms, tirx, tvm_ffi
from .parse import parse_request
from .records import workload_forms


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


def match(params: dict, emit=None) -> dict:
    """``{workload: index | None, how, hashes}`` for the unit's function in ``work_dir``'s database."""
    func = _function(parse_request(params), params.get("member"))
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
