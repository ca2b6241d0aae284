"""Generated code of one function (TVM side): scheduled TVMScript, lowered TIR, LLVM IR, assembly.

Handler ``code`` gets a unit's text (already vetted by the safety gate), the function, the run
directory and optionally one record's trace (``[insts, decisions]`` from the JSON database; None =
the run's best record; no run = the untuned function), and a ``level``:

* ``scheduled`` — the trace replayed on a deep copy of the parsed function, printed as TVMScript;
* ``lowered``   — the scheduled module after the default TIR pipeline (``tirx.build``'s step 4);
* ``llvm`` / ``asm`` — the built host module's LLVM IR / assembly (``inspect_source``).

``serial`` drops the trace's ``Parallel`` instructions first (the best record's through
``profiling.apply_record``; a given trace arrives already without them): parallel loop bodies
carry no line info in assembly.

Printed TIR statements that still carry a span are tagged through the printer's
``obj_to_annotate`` (``analysis.codelinks.tag``); LLVM IR and assembly carry DWARF lines.  The
core (``asight_lsp.services.codeview``) turns tags and line info into links, so that part is TVM-free.
"""
from __future__ import annotations

import json

from ..engine.wire import tag
from ..protocol import CODE_LEVELS
from ..engine import wire
from .compat import Trace, ms, normalize_mod, relax, s_tir, stmt_children, stub_tensor_intrin, tirx, tvm
from ..analysis.codelinks import ptx_failure
from .lineage import mark_index, tie
from .relax_pipeline import bindings
from .parse import parse_request
from .programs import measuring_target, prim_funcs
from .records import apply_record, best_record, fresh_copy, record_latency, run_database
from .tune_plan import params_levers

LEVELS = CODE_LEVELS


def _relax_task(parsed, params: dict, off: frozenset[str]):
    """(task name, PrimFunc MetaSchedule tuned for it, its call sites) of a Relax module, whose tasks
    are its pipeline's without the levers ``off``."""
    from .relax_pipeline import deployable, fuse
    from .relax_profile import block_names, call_sites
    stub_tensor_intrin()
    target = measuring_target(params.get("target"), device=True, build_only=True)   # tasks need no device
    entry = next(gv.name_hint for gv, f in parsed.functions_items() if isinstance(f, relax.Function))
    built, _ = deployable(parsed, entry, params.get("weights"))     # the tasks the run tuned
    tasks = {t.task_name: t for t in ms.relax_integration.extract_tasks(fuse(built, target, off=off), target)}
    name = params.get("task")
    if name not in tasks:
        what = f"no task '{name}' in this model" if name else "a Relax model has one kernel per task: pick one with --task"
        raise ValueError(f"{what} (tasks: {', '.join(sorted(tasks))})")
    lines = {b.var.name: int(b.value.span.line) for b in bindings(parsed[entry]) if b.value.span is not None}
    found = [s for s in call_sites(parsed, target, True, entry, off=off) if s["callee"] == name]
    func = tasks[name].dispatched[0]["main"]
    sites = [{"call": k, "vars": s["vars"], "lines": sorted(lines[v] for v in s["vars"] if v in lines),
              "blockVars": _block_vars(func, s, lines)} for k, s in enumerate(found)]
    return name, func, sites


def _block_vars(fused_func, site: dict, lines: dict) -> dict[str, list]:
    """``{block of the fused kernel: [binding, 1-based line]}``: FuseTIR concatenates the member
    PrimFuncs' blocks in order (renaming repeats), so the k-th block of the fused kernel is the k-th
    block of its members; empty when the counts differ (then nothing is linked)."""
    from .relax_profile import block_names
    fused = block_names(fused_func)
    members = [(var, name) for var, names in zip(site["vars"], site.get("member_blocks") or []) for name in names]
    if len(fused) != len(members):
        return {}
    return {block: [var, lines.get(var)] for block, (var, _) in zip(fused, members)}


def _function(params: dict, off: frozenset[str]):
    parsed = parse_request(params)
    if isinstance(parsed, tvm.IRModule) and any(isinstance(f, relax.Function) for _, f in parsed.functions_items()):
        name, func, sites = _relax_task(parsed, params, off)
        params["_sites"] = sites
        return name, func
    funcs = prim_funcs(parsed, params.get("function"))
    if len(funcs) != 1:
        names = ", ".join(name for name, _ in funcs)
        raise ValueError(f"the code view shows one PrimFunc at a time; name one of: {names}")
    return funcs[0]


def _schedule(func, params: dict) -> tuple[object, dict]:
    """The scheduled module and what was applied (``record``: None = untuned).

    When a trace was applied, ``applied["lineage"]`` lists the blocks and loops it derived from
    source blocks, and the module's derived statements carry spans on their source block's lines
    (``worker/lineage.py``), so every level links them.
    """
    mod = fresh_copy(normalize_mod(func))
    trace_json = params.get("trace")
    if trace_json is not None:
        sch = s_tir.Schedule(mod)
        Trace.apply_json_to_schedule(json.loads(json.dumps(trace_json)), sch)
        return _tied(func, sch, {"source": "the requested record's trace"})
    if params.get("kept") == "dlight":
        return _dlight_kept(mod, params)
    db = run_database(params.get("run_dir"))
    if db is None:
        return mod, {"source": "untuned (no run)", "lineage": []}
    record, match = best_record(db, func, params.get("run_dir"), params.get("chosen"))
    if record is None:
        raise ValueError(match)
    sch = apply_record(func, record, serial=bool(params.get("serial")))
    return _tied(func, sch, {"source": "best record of the run", "match": match,
                             "latency_us": record_latency(record) * 1e6})


def _dlight_kept(mod, params: dict) -> tuple[object, dict]:
    """The run's result when DLight's default schedule beat its tuned record (a GPU run's
    ``measurement.kept``, ``analysis/default_candidate.keep_baseline``): DLight on a copy."""
    from .baseline import dlight_default
    scheduled = dlight_default(mod, gpu_target(params.get("target")))
    return scheduled, {"source": "DLight's default schedule (kept: it measured faster than the tuned record)",
                       "kept": "dlight", "lineage": []}


def _tied(func, sch, applied: dict) -> tuple[object, dict]:
    """Replay ``sch``'s trace once more, noting the blocks each instruction made (``lineage.tie``).

    Lineage only adds links: if its replay fails, the code is shown with span links alone and
    ``lineage_error`` says why.
    """
    try:
        mod, entries = tie(func, fresh_copy(normalize_mod(func)), sch.trace)
    except Exception as err:  # noqa: BLE001 - a TVM error of the second replay must not hide the code
        return sch.mod, {**applied, "lineage": [], "lineage_error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    return mod, {**applied, "lineage": entries}


def annotations(mod) -> dict:
    """``{stmt: tag}`` for every statement of ``mod`` that carries a span."""
    found = {}

    def walk(node):
        span = getattr(node, "span", None)
        if isinstance(node, tirx.Stmt) and span is not None and int(span.line) > 0:
            derived = mark_index(span)
            found[node] = tag(int(span.line), int(span.end_line), isinstance(node, s_tir.SBlockRealize)) \
                + (f":d{derived}" if derived is not None else "")
        for child in stmt_children(node):
            walk(child)

    for gv in mod.get_global_vars():
        func = mod[gv]
        if isinstance(func, tirx.PrimFunc):
            walk(func.body)
    return found


def lowered(mod, target):
    """The module after BindTarget and the default TIR pipeline (what codegen receives, before the
    host/device split)."""
    bound = tirx.transform.BindTarget(target.with_host(target))(mod)
    pipeline, _, _ = tvm.tirx.get_tir_pipeline("default")
    return pipeline(bound)


def code(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """Generated code of one PrimFunc at ``level`` (see the module docstring); a Relax model's task
    is its pipeline's without the request's levers ``off`` (its run's, ``tune_plan.params_levers``)."""
    level = params.get("level") or "scheduled"
    if level not in LEVELS:
        raise ValueError(f"unknown level '{level}' (one of {', '.join(LEVELS)})")
    name, func = _function(params, params_levers(params) if off is None else off)
    mod, applied = _schedule(func, params)
    out = {"function": name, "level": level, "applied": applied, "lineage": applied.get("lineage") or []}
    if "_sites" in params:
        out["task"], out["callSites"] = name, params["_sites"]
    if level == "scheduled":
        out.update(text=mod.script(obj_to_annotate=annotations(mod)), format="tagged-tvmscript")
        return out
    if level == "cuda":
        return {**out, **cuda_source(mod, params.get("target"))}
    if level == "ptx":
        return {**out, **ptx_source(mod, params.get("target"))}
    target = _level_target(params.get("target"), level)
    out["target"] = str(target)
    if level == "lowered":
        low = lowered(mod, target)
        out.update(text=low.script(obj_to_annotate=annotations(low)), format="tagged-tvmscript")
        return out
    built = tvm.tirx.build(mod, target=target)
    kind = "ll" if level == "llvm" else "asm"
    out.update(text=built.inspect_source(kind), format=level)
    return out


def _level_target(spec, level: str):
    """The target a ``lowered``/``llvm``/``asm`` view is built for: the run's, whatever CPU it is for
    (nothing runs: an adopted aarch64 run's code is built here by LLVM's AArch64 backend).  A CUDA run's lowered
    TIR needs no device (TVM's pipeline runs here); its LLVM IR and assembly would be the host's
    launch stubs only, so those two levels are refused with the levels that show its kernels."""
    target = measuring_target(spec, device=True, build_only=True)
    if target.kind.name != "cuda":
        return target
    if level == "lowered":
        return gpu_target(spec, level)
    raise ValueError(f"the {level} level shows a CPU build; this run's target is cuda: its kernels are at "
                     "--level cuda or ptx (lowered TIR at --level lowered)")


def ptx_compiler() -> tuple[str | None, str | None]:
    """(compiler TVM's ``compile_cuda`` can use here, None) — ``nvcc`` on PATH, else NVRTC from the
    cuda-bindings package — or (None, why there is none, in one line)."""
    import importlib.util
    import shutil
    if shutil.which("nvcc"):
        return "nvcc", None
    if importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None:
        return "nvrtc", None
    return None, ("PTX needs a CUDA compiler: nvcc is not on PATH and NVRTC (the cuda-bindings package) is not "
                  "installed; the cuda level shows the kernels' source")


def ptx_source(mod, spec) -> dict:
    """The PTX of the run's CUDA kernels, compiled here with line info (``-lineinfo``: ``.loc`` lines
    of the CUDA source, which ``analysis/codelinks.ptx_links`` follows to the TIR lines); the CUDA
    text and its stores come along for those links.  Needs nvcc or NVRTC, not a GPU."""
    cuda = cuda_source(mod, spec, "ptx")
    compiler, why = ptx_compiler()
    if why:
        raise ValueError(why)
    target = gpu_target(spec)
    arch = str(target.attrs.get("arch", "")) or None
    from .compat import nvcc
    try:
        with target:
            ptx = nvcc().compile_cuda(cuda["text"], target_format="ptx", arch=arch, options=["-lineinfo"],
                                      compiler=compiler)
    except Exception as err:  # noqa: BLE001 - TVM's message is the whole CUDA file, then the compiler's
        raise ValueError(ptx_failure(str(err), arch, compiler)) from None   # analysis/codelinks
    return {**cuda, "text": bytes(ptx).decode("utf-8", errors="replace"), "format": "ptx", "cuda": cuda["text"],
            "compiler": compiler}


def gpu_target(spec, level: str = "cuda"):
    """The run's GPU target (CUDA source needs no device: TVM's codegen writes it without one)."""
    from .metaschedule import resolve_target
    if isinstance(spec, dict):
        spec = json.dumps(spec)
    target = resolve_target(spec) if spec else None
    if target is None:
        raise ValueError(f"the {level} level shows the kernels of a run tuned for CUDA; this function has no run "
                         "(tune it with --target cuda, or adopt a CUDA run)")
    if target.kind.name != "cuda":
        raise ValueError(f"the {level} level shows a CUDA run's kernels; this run's target is {target.kind.name}")
    return target


def store_lines(mod) -> list:
    """``[[buffer, source line (1-based), constant?]]`` of every store with a span in ``mod``."""
    found = []

    def walk(node):
        if isinstance(node, tirx.BufferStore) and node.span is not None and int(node.span.line) > 0:
            found.append([node.buffer.name, int(node.span.line), isinstance(node.value, (tirx.IntImm, tirx.FloatImm))])
        for child in stmt_children(node):
            walk(child)

    for gv in mod.get_global_vars():
        if isinstance(mod[gv], tirx.PrimFunc):
            walk(mod[gv].body)
    return found


def cuda_source(mod, spec, level: str = "cuda") -> dict:
    """The CUDA C source TVM generates for the scheduled module, and the lowered stores (buffer,
    source line) that ``analysis/codelinks.cuda_links`` ties its lines to.  No GPU and no nvcc needed
    (without the CUDA runtime, TVM keeps the source in a fallback module); PTX needs nvcc."""
    target = gpu_target(spec, level)
    built = tvm.tirx.build(mod, target=target)
    device = next((m for m in built.imports), None)
    if device is None:
        raise ValueError("the build made no device module (no kernel to show)")
    return {"text": device.inspect_source("cuda"), "format": "cuda", "target": str(target),
            "stores": store_lines(lowered(mod, target))}


HANDLERS = {wire.CODE: code}
