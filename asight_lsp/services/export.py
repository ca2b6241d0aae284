"""Export a tuned Relax model (TVM-free orchestration): the run's chosen records + the weights
beside the file -> a shared library written by a trusted worker (the linker is a process), then
loaded, checked against the untuned build and timed by a sandboxed one (``worker/model_export.py``).  Decisions: docs/models.md."""
from __future__ import annotations

import os

from ..analysis.deployable import (export_verdict, headline_build, refusal_text, untuned_faster_but_busy,
                                   untuned_wins)
from ..analysis.levers import refusal_lines, refusals_of
from ..engine import wire
from ..engine.client import WorkerClient, borrowed, trusted
from ..engine.targets import runs_on_device
from ..errors import AsightError, WorkerError
from ..store.owner import require_own
from ..store.record import build_of
from ..tvmscript.diagnostics import require_parsed
from .jobs import LIVE_STATES
from .lookup import chosen_records, tuned_file

CPU_PREAMBLE = """# TVM's runtime may otherwise default to one thread: the headline was measured with {threads}
os.environ.setdefault("TVM_NUM_THREADS", "{threads}")"""
CUDA_PREAMBLE = """# the kernels are CUDA C in the library: TVM compiles them for this GPU when it is loaded, through
# TVM's Python: NVRTC (the cuda-bindings package) by default; without it, nvcc on PATH and this line:
# os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
"""[:-1]
CUDA_SOURCE_NOTE = ("the kernels are CUDA C in the library (TVM 0.27 keeps them as source): the machine that loads it "
                    "compiles them at load through TVM's Python, with NVRTC (cuda-bindings) or nvcc "
                    "(TVM_CUDA_COMPILE_MODE=nvcc); a C++-only deployment cannot load it")
LOAD_SNIPPET = """import os
{preamble}
import numpy as np, tvm
from tvm import relax
dev = tvm.{device}()
vm = relax.VirtualMachine(tvm.runtime.load_module("{library}"), dev)
{args}
out = vm["{function}"]({names})  # {returns}"""


def export_model(path: str, out: str, run: str | None = None, function: str | None = None,
                 store_root: str | None = None, worker=None, text: str | None = None, *,
                 tune_missing: int = 0, allow_untuned: bool = False, on_event=None, measure: bool = True,
                 tuned: bool = False, untuned: bool = False) -> dict:
    """Build ``path``'s Relax model with a run's records into ``out`` (see the module doc).

    ``status``: ``refused`` (kernels without records; nothing written; ``message`` says which and
    what they cost), or ``written`` with ``check`` (outputs vs untuned) and ``measured`` (the
    library timed against the headline's build in a separate worker, ``analysis/deployable``).
    When the run measured the tuned build slower than the untuned one, the untuned build is written
    (``untuned_export`` says why) unless ``tuned``; ``untuned`` writes it in any case."""
    if tuned and untuned:
        raise AsightError("--tuned and --untuned ask for different builds; pass one")
    tf = tuned_file(path, function, run, store_root, text)
    found, meta, selection, text, outline = tf.run, tf.meta, tf.selection, tf.text, tf.outline
    if tune_missing:
        require_own(found.path, f"tuning its missing kernels ({tune_missing} trials into {found.path}/export-tuned)")
    require_exportable(found, meta, out)
    measured = meta.measured
    record = measured.raw if measured else None
    params = {**wire.source_params(text, outline, selection.unit, selection.member),
              "run_dir": str(found.path.resolve()), "target": meta.target,
              "chosen": chosen_records(meta),   # [] = measured, every default kept: not "none"
              "weights": wire.weights_beside(path), "out": os.path.abspath(out),
              "tune_missing": int(tune_missing or 0), "allow_untuned": bool(allow_untuned),
              "defaults": [{"task": d["task"], "workload_hash": d.get("workload_hash"), "default": d.get("default")}
                           for d in (measured.defaults if measured else None) or []]}
    params["function"] = next((f.name for f in selection.functions if f.kind == "relax_function"), "main")
    why_untuned = ("--untuned: exported the untuned build (TVM's default schedules, the model as tvm.compile "
                   "builds it)") if untuned else None if tuned else untuned_wins(record)
    params["untuned"] = why_untuned is not None
    with borrowed(worker) as client:
        require_parsed(text, path, selection.unit, client)     # the sandboxed worker parses first
    with trusted(getattr(worker, "python", None), 3600) as unsandboxed:   # the linker is a process
        reply = unsandboxed.request(wire.EXPORT_MODEL, params, timeout=3600, on_event=on_event)
    reply.update(run=meta.id, weights=params["weights"], headline={**headline_of(meta), **_headline(meta)},
                 levers_refused=refusals_of(meta.extra, reply), levers_refused_text=refusal_lines(meta.extra, reply))
    if reply.get("status") == "refused":
        if params["weights"] is None and meta.build is not None and meta.build.bound:
            reply["applied"]["unbound"] = True   # tuned with the weights bound, exported without them
        reply["message"] = refusal_text(reply["applied"])
        return reply
    reply["load"] = load_snippet(reply)
    if reply.get("device") == "cuda":
        reply["device_code"] = CUDA_SOURCE_NOTE
    busy_note = None if why_untuned or tuned else untuned_faster_but_busy(record)
    reply.update({k: v for k, v in (("untuned_export", why_untuned), ("untuned_note", busy_note)) if v})
    python = getattr(worker, "python", None)
    with library_worker(meta.target, python) as checker:
        try:
            reply["check"] = checker.request(wire.CHECK_EXPORT, {**params, "library": reply["library"]}, timeout=1800)
        except WorkerError as err:
            raise AsightError(f"wrote {reply['library']}, but loading it back to check its outputs failed: "
                              f"{err}") from None
    if measure and params["chosen"] is not None and not reply["check"].get("skipped"):
        with library_worker(meta.target, python) as fresh:     # timed in a process that ran nothing else
            reply["measured"] = measure_library(params, meta, reply, fresh, on_event)
    return reply


def require_exportable(found, meta, out: str) -> None:
    """AsightError when the run cannot be exported (failed, not a model, still tuning, no records) or
    ``out`` names no file in an existing folder."""
    if meta.state == "failed" and not found.records():
        raise AsightError(f"run {meta.id} failed with no trial measured ({meta.error or 'no reason recorded'}); "
                          "tune the model again")
    if meta.kind != "relax":
        code = ("asight code --level cuda shows its kernel's CUDA source" if runs_on_device(meta.target) else
                "asight code --level asm shows a PrimFunc's machine code")
        raise AsightError(f"run {meta.id} tuned the TIR function {meta.function}, not a Relax model: export builds "
                          f"models ({code})")
    if meta.state in LIVE_STATES:
        raise AsightError(f"run {meta.id} is still tuning; export when it is done (or cancel it)")
    if not found.records():
        raise AsightError(f"run {meta.id} has no records yet")
    if os.path.isdir(out):
        raise AsightError(f"{out} is a directory; name the library file (model.so)")
    if not out.endswith(".so"):
        raise AsightError(f"{out}: name the library file model.so (TVM's loader picks by the extension; another name "
                          "is written but cannot be loaded)")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise AsightError(f"the folder {os.path.dirname(os.path.abspath(out))} does not exist; create it first")


def library_worker(target, python: str | None):
    """A worker of its own that loads the written library (loading a library runs its code): the
    sandboxed worker on the CPU, the unsandboxed one on a GPU (the driver needs what the sandbox
    refuses; ``engine/targets.runs_on_device``).  Not the worker that built it; one for the output
    check, a fresh one for the timing."""
    return trusted(python, 1800) if runs_on_device(target) else WorkerClient(python, 1800)


def _headline(meta) -> dict:
    measured = meta.measured
    return {"tuned_us": measured.tuned_us if measured else None,
            "threads": (measured.harness or {}).get("threads") if measured else None}


def measure_library(params: dict, meta, reply: dict, worker, on_event=None) -> dict:
    """The written library timed interleaved with the build the run's headline measured, in ``worker``
    (``library_worker``: same harness and thread count as the tuning job's headline); the record
    plus ``verdict`` (``analysis.deployable.export_verdict``)."""
    if on_event:
        on_event({"type": "status", "message": "timing the library against the headline's build"})
    build = "deployable" if build_of(meta) else "parameters"
    request = {**params, "library": reply["library"], "headline_build": build}
    record = worker.request(wire.MEASURE_EXPORT, request, timeout=1800)
    record["verdict_export"] = export_verdict(record, bool(reply["applied"].get("tuned_at_export")),
                                              untuned=bool(reply["applied"].get("untuned_build")))
    return record


def headline_of(meta) -> dict:
    """Which build a Relax run's headline measured and whether ``asight export`` would build the
    same now (``analysis.deployable.headline_build``; the weights file's digest is memoised)."""
    build = build_of(meta)
    return headline_build(build.as_dict() if build else None, wire.weights_digest(wire.weights_beside(meta.file)))


def default_output(path: str) -> str:
    """Where the editor's export writes when the user names no file: ``<stem>.so`` beside the model."""
    return os.path.splitext(os.path.abspath(path))[0] + ".so"


def applied_text(reply: dict) -> str:
    """``3 of 4 tuned kernels from run R's records`` (+ what was not applied, what folded away)."""
    applied = reply.get("applied") or {}
    if applied.get("untuned_build"):
        return f"none from run {reply.get('run')}'s records: the untuned build (TVM's default schedules)"
    text = f"{len(applied.get('from_records') or [])} of {applied.get('kernels', '?')} kernels from run {reply.get('run')}'s records"
    if applied.get("tuned_at_export"):
        text += f" ({len(applied['tuned_at_export'])} tuned at export: {', '.join(applied['tuned_at_export'])})"
    untried = set(applied.get("nothing_to_tune") or [])
    won = [k for k in applied.get("default_kept") or [] if k not in untried]
    if won:
        text += f"; default schedule kept (re-measured faster than every trial): {', '.join(won)}"
    if untried:
        text += f"; default schedule kept (nothing to tune: it moves data or its space has one schedule): " \
                f"{', '.join(sorted(untried))}"
    if applied.get("missing"):
        text += f"; NOT TUNED (TVM's default schedule, accepted with --allow-untuned): {', '.join(applied['missing'])}"
    if applied.get("folded"):
        text += f"; folded into constants with the weights: {', '.join(applied['folded'])}"
    return text


def measured_text(reply: dict) -> str | None:
    """The library against the headline's build, both with their interquartile range, and the verdict."""
    record = reply.get("measured")
    if not record or not record.get("tuned"):
        return None
    head, lib = record["untuned"], record["tuned"]
    return (f"headline build {_ms(head)} vs exported library {_ms(lib)}; "
            f"{(record.get('verdict_export') or {}).get('text', '')}")


def _ms(summary: dict) -> str:
    return (f"{summary['median_us'] / 1e3:.3f} ms (p25-p75 {summary['p25_us'] / 1e3:.3f}-"
            f"{summary['p75_us'] / 1e3:.3f})")


def export_ok(reply: dict) -> bool:
    """Written, outputs match the untuned build, and (when measured) as fast as the headline's build."""
    check = reply.get("check") or {}
    if reply.get("status") != "written" or not (check.get("ok") or check.get("skipped")):
        return False
    verdict = (reply.get("measured") or {}).get("verdict_export")
    return verdict is None or bool(verdict.get("ok"))


def tuned_missing_text(reply: dict) -> str:
    """What ``--tune-missing`` did when it measured fewer trials than asked ('' otherwise): the kernels
    and the shortfall's sentence (``analysis/shortfall``), so a short tuning is never silent."""
    done = reply.get("tuned_missing") or {}
    short = done.get("shortfall")
    if not short:
        return ""
    kernels = done.get("kernels") or []
    return f"tuning the {len(kernels)} missing kernel{'s' if len(kernels) != 1 else ''} ({', '.join(kernels)}) " \
        f"{short['text']}"


def export_summary(reply: dict) -> str:
    """One paragraph for the editor: the library, the records check, the weights and the output check."""
    short = tuned_missing_text(reply)
    if reply.get("status") == "refused":
        return "export refused: " + reply.get("message", "") + (f" ({short})" if short else "")
    check = reply.get("check") or {}
    weights = (f"{reply['bound_weights']} weights bound from {os.path.basename(reply['weights'])}"
               if reply.get("bound_weights") else
               "no weights file beside the model (<file>.weights.npz): the library takes every parameter as an input")
    outputs = ("outputs match the untuned build" if check.get("ok") else
               f"not checked: {check['skipped']}" if check.get("skipped") else "outputs DIFFER from the untuned build")
    measured = measured_text(reply)
    return f"wrote {reply.get('library')} · {applied_text(reply)} · {weights} · {outputs}" + \
        "".join(f" · {line}" for line in reply.get("levers_refused_text") or []) + \
        (f" · {reply['untuned_export']}" if reply.get("untuned_export") else "") + \
        (f" · note: {reply['untuned_note']}" if reply.get("untuned_note") else "") + \
        (f" · {measured}" if measured else "") + (f" · {short}" if short else "") + \
        (f" · {reply['device_code']}" if reply.get("device_code") else "")


def returns_text(outputs: list[dict] | None) -> str:
    """What the model's call gives back, for the load snippet's last line: ``a tvm Tensor (1, 10)
    float32: out.numpy()``, or for several outputs ``a tuple of 2: out[0] (4, 3) float32, out[1] (4, 3)
    int32; out[i].numpy()`` (a probe user missed that a two-output model returns a tuple)."""
    def one(o: dict) -> str:
        return f"a tuple of {o['tuple']}" if "tuple" in o else f"{tuple(o['shape'])} {o['dtype']}"
    if not outputs:
        return "the model's outputs"
    if len(outputs) == 1 and "tuple" not in outputs[0]:
        return f"a tvm Tensor {one(outputs[0])}: out.numpy()"
    return (f"a tuple of {len(outputs)}: " + ", ".join(f"out[{i}] {one(o)}" for i, o in enumerate(outputs))
            + "; out[i].numpy()")


def input_text(entry: dict) -> str:
    """The load snippet's word on an input: the library takes exactly its static shape (a model
    imported with a dynamic batch is built for the batch it was imported with)."""
    symbolic = [str(d) for d in entry["shape"] if not isinstance(d, int)]
    if symbolic:
        return f"your input (any {', '.join(symbolic)}; the other dimensions as shown)"
    return "your input: this shape exactly (the library is built for it; re-import with --shape for another)"


def load_snippet(reply: dict) -> str:
    """Python that loads the library and calls it (the model's inputs as numpy arrays), with TVM's
    thread count set as the headline was measured (TVM's runtime may otherwise use one thread)."""
    lines = [f'{i["name"]} = tvm.runtime.tensor(np.zeros({tuple(i["shape"])}, "{i["dtype"]}"), dev)  # {input_text(i)}'
             for i in reply["inputs"]]
    threads = (reply.get("headline") or {}).get("threads") or len(os.sched_getaffinity(0))
    device = reply.get("device") or "cpu"
    preamble = CUDA_PREAMBLE if device == "cuda" else CPU_PREAMBLE.format(threads=threads)
    return LOAD_SNIPPET.format(library=reply["library"], function=reply["function"], args="\n".join(lines),
                               device=device, returns=returns_text(reply.get("outputs")),
                               names=", ".join(i["name"] for i in reply["inputs"]), preamble=preamble)
