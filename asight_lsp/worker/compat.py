"""Every TVM import of asight_lsp, and the shims for TVM 0.27 (see docs/tvm.md)."""
from __future__ import annotations

import importlib
import os
import re
import sys
import types
from contextvars import ContextVar
from typing import TypeVar

import tvm  # noqa: F401  (0.8 s, 190 MiB: paid once per worker process)
import tvm.script
import tvm_ffi
from tvm import relax, rpc, s_tir, te, tirx
from tvm.error import DiagnosticError
from tvm.ir.utils import derived_object
from tvm.s_tir import dlight
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir as task_loggers
from tvm.s_tir.meta_schedule.utils import fork_seed
from tvm.s_tir.schedule import Trace
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind
from tvm.support.tar import tar

from ..tvmscript.safety import code_string_problem

__all__ = ["tvm", "tvm_ffi", "relax", "rpc", "s_tir", "tirx", "ms", "Trace", "DiagnosticError", "derived_object",
           "task_loggers", "fork_seed", "RemoveWeightLayoutRewriteBlock", "PopenPoolExecutor", "StatusKind", "tar",
           "script_globals", "stub_tensor_intrin", "import_tensor_intrin", "register_tensor_intrin", "normalize_mod", "host_target",
           "parse_script", "builder_job", "load_metadata", "guard_shape_strings", "onnx_importer", "onnx_convert_map", "torch_importer",
           "winograd_parts", "te"]


def script_globals(constants: dict | None = None, aliases: dict | None = None, metadata=None) -> dict:
    """Globals for ``tvm.script.from_source``: TVM's own (T/I/R/Tx ...), the file's namespace aliases,
    literal constants, printed ``TypeVar`` symbols and, when given, the printed ``metadata``."""
    env = tvm.script.parser.core.entry._default_globals()
    namespaces = {"T": env["T"], "I": env["I"], "R": env["R"], "Tx": env["Tx"]}
    for alias, what in (aliases or {}).items():
        if what in namespaces:
            env[alias] = namespaces[what]
        elif what == "TypeVar":
            env[alias] = TypeVar(alias)
    env.update(constants or {})
    if metadata is not None:
        env["metadata"] = metadata
    return env


def parse_script(text: str, constants: dict | None = None, aliases: dict | None = None,
                 check_well_formed: bool = True, metadata=None, macros: list | None = None):
    """Parse TVMScript text (already vetted by the safety gate) into a PrimFunc or IRModule.

    Strings Relax evaluates as shape expressions pass the gate's rules first, computed ones too
    (``guard_shape_strings``).  ``macros``: the file's module-level ``@T.macro`` defs the gate passed,
    ``(name, text, filename)`` in order (``define_macros``)."""
    token = _ALIASES.set(dict(aliases or {}))
    try:
        env = script_globals(constants, aliases, metadata)
        define_macros(env, macros or [])
        return tvm.script.from_source(text, extra_vars=env, check_well_formed=check_well_formed)
    finally:
        _ALIASES.reset(token)


def define_macros(env: dict, macros: list) -> None:
    """Run each macro's ``def`` (decorators, defaults, annotations: gated) in ``env`` as Python would
    at module level, so ``T.macro`` captures ``env`` as a hygienic macro's names; its source is
    registered under ``filename`` for ``inspect`` (TVM reads the body from there when it is called)."""
    import linecache

    for name, text, filename in macros:
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), env)  # noqa: S102 - a gated def: runs no body
        if name not in env:
            raise ValueError(f"macro {name!r} was not defined")


def save_ir(obj) -> str:
    """A parsed unit (PrimFunc, IRModule, Relax function) as TVM's JSON (data: no code)."""
    return tvm.ir.save_json(obj)


def load_ir(json_text: str):
    """The object ``save_ir`` wrote."""
    return tvm.ir.load_json(json_text)


def load_metadata(json_text: str):
    """The objects of a printed metadata section (its JSON already checked to hold IR data only)."""
    return tvm.ir.load_json(json_text)


_ALIASES: ContextVar[dict] = ContextVar("asight_script_aliases", default={})


def guard_shape_strings() -> None:
    """Make Relax's ``_eval_shape`` (it ``eval``s shape strings of annotations with the parser's
    globals and builtins) refuse a string the gate would refuse (docs/safety.md)."""
    from tvm.relax.script.parser import entry

    original = getattr(entry._eval_shape, "__wrapped__", entry._eval_shape)

    def _eval_shape(expr, dict_globals):
        if isinstance(expr, str):
            problem = code_string_problem(expr, _ALIASES.get() or {"T": "T", "R": "R", "I": "I", "Tx": "Tx"})
            if problem is not None:
                raise ValueError(f"not evaluated: {problem}")
        return original(expr, dict_globals)

    _eval_shape.__wrapped__ = original
    entry._eval_shape = _eval_shape


guard_shape_strings()


def stub_tensor_intrin() -> None:
    """Register only the x86 tensor intrinsics instead of importing ``tvm.s_tir.tensor_intrin``.

    The full import takes ~19 s (its CUDA part 15 s); MetaSchedule's TuneContext does it once and
    the default builder does it in every builder worker (docs/tvm.md §0).
    """
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    pkg = types.ModuleType("tvm.s_tir.tensor_intrin")
    pkg.__path__ = [os.path.join(os.path.dirname(s_tir.__file__), "tensor_intrin")]
    sys.modules["tvm.s_tir.tensor_intrin"] = pkg
    import tvm.s_tir.tensor_intrin.x86  # noqa: F401


def import_tensor_intrin() -> dict | None:
    """Every tensor intrinsic the package ``tvm.s_tir.tensor_intrin`` registers (CUDA's, and with LLVM the
    ARM, ROCm, Hexagon and RISC-V ones: GPU design spaces need them; ~17 CPU-seconds, once per process),
    the package itself left as ``stub_tensor_intrin`` makes it (the x86 ones registered there).
    Returns ``{name: (desc, impl)}`` of what this call registered (``worker/intrinsics.py`` keeps them),
    or None where one of the modules was imported before (what it registered then was not seen)."""
    stub_tensor_intrin()
    modules = ["cuda"] + (["arm_cpu", "rocm", "hexagon", "riscv_cpu"] if tvm.runtime.enabled("llvm") else [])
    names = [f"tvm.s_tir.tensor_intrin.{m}" for m in modules]
    seen_before = any(name in sys.modules for name in names)
    registered: dict = {}
    original = s_tir.TensorIntrin.register

    def register(name, desc, impl, override=False):
        registered[name] = (desc, impl)
        return original(name, desc, impl, override)

    s_tir.TensorIntrin.register = staticmethod(register)
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        s_tir.TensorIntrin.register = staticmethod(original)
    return None if seen_before else registered


_KEPT_INTRINSICS: set[str] = set()


def register_tensor_intrin(kept: dict) -> None:
    """Register ``{name: (desc, impl)}`` as ``import_tensor_intrin`` returned them (names already
    registered are left as they are).  A later real import of their module (DLight's GPU matmul
    imports ``tensor_intrin.cuda`` for its helpers) registers them again over these."""
    if not _KEPT_INTRINSICS:
        original = s_tir.TensorIntrin.register
        s_tir.TensorIntrin.register = staticmethod(
            lambda name, desc, impl, override=False: original(name, desc, impl, override or name in _KEPT_INTRINSICS))
    for name, (desc, impl) in kept.items():
        if s_tir.TensorIntrin.get(name, allow_missing=True) is None:
            s_tir.TensorIntrin.register(name, desc, impl)
            _KEPT_INTRINSICS.add(name)


def builder_job(f_build, item, f_export=None) -> tuple:
    """``(function, args)`` that builds one ``BuilderInput`` in a pool worker exactly as MetaSchedule's
    ``LocalBuilder`` does (its worker function and parameter serialisation are private in 0.27)."""
    from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
    return _worker_func, (f_build, f_export, item.mod, item.target, _serialize_params(item.params))


def onnx_importer():
    """TVM's ONNX importer (``relax.frontend.onnx.from_onnx``) and ``onnx.load``; the onnx package
    is a dependency of asight (docs/dependencies.md)."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    return onnx.load, from_onnx


def onnx_convert_map() -> set:
    """The ONNX operator names TVM's importer has a converter for."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
    return set(_get_convert_map())


def winograd_parts(tile: int, kernel: int):
    """TOPI's Winograd pieces for F(tile x tile, kernel x kernel): the Cook-Toom matrices A, B, G as
    float64 numpy arrays (``winograd_util``'s private helpers: its public function gives TE constants
    only), ``const_matrix`` (a numpy matrix as a TE tensor the Winograd schedule rules inline), and
    TOPI's ``pad``."""
    from tvm.topi.nn.pad import pad
    from tvm.topi.nn.winograd_util import _cook_toom_convolution, _interpolation_points
    from tvm.topi.utils import const_matrix
    a, b, g = _cook_toom_convolution(_interpolation_points(tile + kernel - 2), tile, kernel)
    return (a, b, g), const_matrix, pad


_NONFINITE_CONST = re.compile(r'R\.const\("(-?inf|nan)"')


def script_text(mod) -> str:
    """``mod.script()`` that TVM's parser reads back.  0.27 prints a non-finite Relax constant as
    ``R.const("-inf", "float32")`` (ONNX's Clip and masked attention import one), which its parser
    rejects ("value has to be scalar or Tensor"); printed as ``R.const(float("-inf"), "float32")`` it
    parses to the same constant."""
    return _NONFINITE_CONST.sub(r'R.const(float("\1")', mod.script())


def load_torch():
    """PyTorch's ``torch`` module (ImportError where it is not installed).  The product's processes start
    without it (``engine/startup/no_torch.py``: ``import tvm`` would import it, 2 CPU-seconds a
    process); this allows it and imports it, for the requests that need it."""
    from ..engine.startup import no_torch
    no_torch.allow()
    import torch
    return torch


def torch_importer():
    """PyTorch's ``torch`` module, its pytree module and TVM's ``from_exported_program`` (only where
    PyTorch is installed: ImportError otherwise)."""
    torch = load_torch()
    import torch.utils._pytree as pytree
    from tvm.relax.frontend.torch import from_exported_program
    return torch, pytree, from_exported_program


def normalize_mod(func):
    """What MetaSchedule tunes for a PrimFunc (adds ``tirx.noalias``); DB lookups need it."""
    from tvm.s_tir.meta_schedule.tune_context import _normalize_mod
    return _normalize_mod(func)


def hoist_root_allocs(mod):
    """``mod`` (an IRModule of PrimFuncs) with each function's body-level ``AllocBuffer`` statements
    (TVMScript's ``T.alloc_buffer`` at function level parses to statements in the root block's body
    in 0.27) moved into the root block's ``alloc_buffers``, where MetaSchedule's GPU rules expect
    them; a function without such statements is returned unchanged (same object)."""
    funcs, changed = {}, False
    for gv, func in mod.functions_items():
        new = _hoisted(func) if isinstance(func, tirx.PrimFunc) else None
        funcs[gv] = new if new is not None else func
        changed |= new is not None
    return tvm.IRModule(funcs, attrs=mod.attrs) if changed else mod


def _hoisted(func):
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        return None
    root = realize.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    allocs = [s.buffer for s in stmts if type(s).__name__ == "AllocBuffer"]
    rest = [s for s in stmts if type(s).__name__ != "AllocBuffer"]
    if not allocs or not rest:
        return None
    body = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init,
                            list(root.alloc_buffers) + allocs, root.match_buffers, root.annotations)
    return tirx.PrimFunc(func.params, s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root),
                         func.ret_type, func.attrs)


def host_target(num_cores: int | None = None):
    """The host CPU as an llvm target with the real ``mcpu`` ("native" is silently ignored)."""
    mcpu = tvm.get_global_func("tvm.codegen.llvm.GetHostCPUName")()
    cores = num_cores or int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    return tvm.target.Target({"kind": "llvm", "num-cores": cores, "mcpu": mcpu})


def stmt_children(stmt) -> list:
    """The child statements of a TIR statement (TVM 0.27 has no Python TIR visitor)."""
    if stmt is None:
        return []
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        return [stmt.block]
    if isinstance(stmt, s_tir.SBlock):
        return [s for s in (stmt.init, stmt.body) if s is not None]
    if isinstance(stmt, tirx.IfThenElse):
        return [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    body = getattr(stmt, "body", None)
    return [body] if isinstance(body, tirx.Stmt) else []


def nvcc():
    """TVM's CUDA compiler driver (``tvm.support.nvcc``: nvcc or NVRTC), imported when PTX is asked for."""
    from tvm.support import nvcc as module
    return module
