"""Small helpers about the programs the worker measures: target, entry name, PrimFuncs of a unit,
parameter shapes, FLOPs estimate, and optional steps that fail alone."""
from __future__ import annotations

import json

from ..engine.targets import foreign_arch, require_no_compiler_options, require_runs_here
from .compat import host_target, relax, s_tir, tirx, tvm

SOURCE_FLOPS = "tvm.s_tir.analysis.estimate_tir_flops of the untuned program"


def measuring_target(spec, device: bool = False, build_only: bool = False):
    """The measuring target: the run's target (JSON dict/text or string) or the host CPU; ``device``:
    a CUDA target is one too (a model built for a GPU: ``asight export``), with an LLVM host;
    ``build_only``: nothing will run (the code view), so code for another CPU architecture is fine
    (an adopted aarch64 run on x86_64), where this TVM's LLVM can emit it (``require_emits``)."""
    if spec in (None, "", "host"):
        return host_target()
    if isinstance(spec, str) and spec.strip().startswith("{"):
        spec = json.loads(spec)
    target = tvm.target.Target(spec)
    if target.kind.name != "llvm" and not (device and target.kind.name == "cuda"):
        raise ValueError(f"profiling measures on this machine's CPU; the target is {target.kind.name}")
    if target.host is not None and target.host.kind.name != "llvm":   # a run.json is data: it may say anything
        raise ValueError(f"a target host of kind {target.host.kind.name!r} is not supported (the host code is LLVM's)")
    for part in (target, target.host):
        if part is not None and part.kind.name == "llvm":
            mtriple = str(part.attrs.get("mtriple") or "")
            require_emits(mtriple) if build_only else require_runs_here(mtriple)
    for part in (target, target.host):     # a run.json's target is data: checked as a user's would be
        if part is not None:
            require_no_compiler_options(part.attrs)
    return target


def require_emits(mtriple: str) -> None:
    """Code for another architecture is built by LLVM's backend for it: refused in one sentence where
    this TVM's LLVM has none (a wheel's LLVM usually has AArch64, RISC-V, ...: ``llvm_get_targets``)."""
    arch = foreign_arch(mtriple)
    if not arch:
        return
    try:
        known = {str(name) for name in tvm.target.codegen.llvm_get_targets()}
    except Exception:  # noqa: BLE001 - an older TVM without the query: the build says it
        return
    names = {mtriple.strip().lower().split("-")[0], arch, "i386" if arch == "x86" else arch}   # arm64, i686
    if not names & known:
        raise ValueError(f"this run's target (mtriple {mtriple!r}) makes {arch} code, and the LLVM in this "
                         f"machine's TVM has no {arch} backend, so its code cannot be built here (the "
                         "scheduled level shows it)")


def target_label(target) -> str:
    """``llvm -mcpu=znver3 -num-cores=2``: the target as a short command-line style label."""
    attrs = getattr(target, "attrs", {}) or {}
    parts = [target.kind.name] + [f"-{key}={attrs[key]}" for key in ("mcpu", "num-cores")
                                  if attrs.get(key) not in (None, "")]
    return " ".join(parts)


def is_relax(parsed) -> bool:
    return isinstance(parsed, tvm.IRModule) and any(
        isinstance(parsed[gv], relax.Function) for gv in parsed.get_global_vars())


def prim_funcs(parsed, function: str | None) -> list[tuple[str, object]]:
    """(name, PrimFunc) pairs to profile: the named function, or every PrimFunc of the unit."""
    if isinstance(parsed, tirx.PrimFunc):
        return [(function or "main", parsed)]
    names = [gv.name_hint for gv in parsed.get_global_vars() if isinstance(parsed[gv], tirx.PrimFunc)]
    if function:
        if function not in names:
            raise ValueError(f"no PrimFunc '{function}' in the module (has: {', '.join(sorted(names))})")
        names = [function]
    return [(name, parsed[name]) for name in sorted(names)]


def entry_name(mod) -> str:
    func = mod["main"]
    return str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "main"


def buffer_specs(func) -> list[tuple[str, tuple, str]]:
    specs = []
    for param in func.params:
        try:
            shape = tuple(int(x) for x in param.shape)
        except (TypeError, AttributeError, ValueError):
            raise ValueError(f"parameter '{param.name}' has no static shape; profiling needs one") from None
        specs.append((param.name, shape, str(param.dtype)))
    return specs


def estimate_flops(mod) -> float | None:
    try:
        return float(s_tir.analysis.estimate_tir_flops(mod))
    except Exception:  # TVM refuses some programs (e.g. data-dependent loops)
        return None


def optional_step(fn) -> dict:
    """Optional measurements fail alone: their error becomes data, the profile goes on."""
    try:
        return fn()
    except Exception as err:
        return {"error": first_line(err)}


def short_error(err: BaseException) -> str:
    """The type and the last line of an error (TVM puts the check that failed last)."""
    lines = [x for x in str(err).strip().splitlines() if x.strip()]
    return f"{type(err).__name__}: {lines[-1][:300]}" if lines else type(err).__name__


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
