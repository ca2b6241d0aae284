"""Which native functions a program may call by name before ASight builds and runs it (docs/sandbox.md).

TIR's ``T.call_extern("int32", "system", ...)`` links a C function by name, and ``T.call_packed``,
``R.call_packed`` and ``R.call_pure_packed`` call any function registered in TVM's runtime — among
them ``ffi.ModuleLoadFromFile``, which loads any shared library.  Parsing such a call is harmless;
building and running it (tune, profile, export, compare) ran the file's choice of native code.  So
every unit is read for these calls (``worker/compat.native_calls``: ``(op, symbol)`` pairs, whatever
spelling the script used) and only the names below pass: math functions, TVM's own VM builtins that
move data, and the vendor libraries TVM offloads to.  Pure: no TVM here.
"""
from __future__ import annotations

import re

# C math functions (C99 <math.h>): double, float (f) and long double (l) forms
_MATH = ("acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 exp10 expm1 "
         "fabs fdim floor fma fmax fmin fmod hypot ilogb ldexp lgamma llrint llround log log10 log1p log2 logb "
         "lrint lround nearbyint nextafter pow remainder rint round scalbn sin sinh sqrt tan tanh tgamma trunc "
         "rsqrt").split()
EXTERN_NAMES = frozenset(n + suffix for n in _MATH for suffix in ("", "f", "l"))
# device-side names (CUDA libdevice, HIP's ocml, warp intrinsics): they do not exist in a host library
EXTERN_PREFIXES = ("__nv_", "__ocml_", "__ockl_", "__shfl", "__syncthreads", "__syncwarp", "__ldg", "__half",
                   "__float2half", "__half2float", "__hadd", "__hmul", "__hfma", "__expf", "__logf", "__powf",
                   "__sinf", "__cosf", "__fdividef", "atomicAdd", "atomicMax", "atomicMin", "atomicCAS")

# VM builtins that allocate, check, reshape or move data (TVM 0.27's list without those that load files,
# look up or call Python functions, call a debug hook, or send a KV cache elsewhere)
VM_BUILTINS = frozenset("vm.builtin." + n for n in (
    "alloc_shape_heap alloc_storage alloc_tensor apply_presence_and_frequency_penalty apply_repetition_penalty "
    "apply_softmax_with_temperature call_tir_dyn check_func_info check_prim_value_info check_shape_info "
    "check_string_info check_tensor_info check_tuple_info copy debug_print ensure_zero_offset invoke_closure "
    "make_closure make_prim_value make_shape make_tuple match_prim_value match_shape memory_manager.clear "
    "multinomial_from_uniform null_value read_if_cond reshape sample_top_p_from_logits sample_top_p_from_prob "
    "shape_of tensor_to_shape to_device tuple_getitem tuple_reset_item").split())
PACKED_PREFIXES = ("vm.builtin.attention_kv_cache_", "vm.builtin.kv_state_", "vm.builtin.rnn_state_",
                   "vm.builtin.paged_attention_kv_cache_create",
                   "tvm.contrib.sort.", "tvm.contrib.random.", "tvm.contrib.cblas.", "tvm.contrib.mkl.",
                   "tvm.contrib.dnnl.", "tvm.contrib.cublas.", "tvm.contrib.cublaslt.", "tvm.contrib.cudnn.",
                   "tvm.contrib.thrust.", "tvm.contrib.hipblas.", "tvm.contrib.rocblas.", "tvm.contrib.miopen.",
                   "tvm.contrib.nnpack.")

# operators that call a function by a name (TVM 0.27); any other operator whose name has "call" in it
# and is not one of SAFE_CALL_OPS is treated as one too (a new TVM's operator fails closed)
EXTERN_OPS = frozenset({"tirx.call_extern", "tirx.call_pure_extern", "tir.call_extern", "tir.call_pure_extern"})
SAFE_CALL_OPS = frozenset({"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad",
                           "relax.dist.call_tir_local_view", "relax.vm.call_tir_dyn", "tirx.call_llvm_intrin",
                           "tirx.call_llvm_pure_intrin", "tirx.call_spirv_pure_glsl450", "tir.call_llvm_intrin",
                           "tir.call_llvm_pure_intrin", "tir.call_spirv_pure_glsl450"})
EXTERN_FUNC = "relax.ExternFunc"   # the op reported for a Relax ExternFunc (R.call_packed & co. call one)
# attribute keys whose value is source code the code generator pastes in (C, LLVM IR): a function that
# calls system() defined there, called by an allowed-looking name, ran as root under `asight export`
INJECTED_SOURCE = "pragma_import"   # pragma_import_llvm, pragma_import_c (T.attr, annotations, T.import_source)


SYMBOL = "global_symbol"   # reported with a function's name when it is not a C identifier
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_native_call_op(op: str) -> bool:
    """Does operator ``op`` call a function by name (so its callee must be checked)?"""
    return op in EXTERN_OPS or op == EXTERN_FUNC or ("call" in op.split(".")[-1] and op not in SAFE_CALL_OPS)


def allowed(op: str, symbol: str | None, device: bool = True) -> bool:
    """May a program call ``symbol`` through ``op``?  ``symbol`` None: not a literal name.  ``device``
    False (a CPU build): device-library names are not allowed either (on the host they are only
    defined by pasted-in source, and undefined they crash the process that loads the library)."""
    if symbol is None:
        return False
    if op == SYMBOL:      # a code generator prints it into source: only an identifier is a name
        return bool(_IDENTIFIER.match(symbol))
    if op in EXTERN_OPS:
        return symbol in EXTERN_NAMES or (device and symbol.startswith(EXTERN_PREFIXES))
    if op == EXTERN_FUNC or "packed" in op or op.endswith("call_builtin_with_ctx"):
        return symbol in VM_BUILTINS or symbol.startswith(PACKED_PREFIXES)
    return False     # call_py_func, call_ffi_kernel, cuda.func_call, an operator this list does not know


def refused(calls: list[tuple], device: bool = True) -> list[tuple]:
    """The calls of ``calls`` (``(op, symbol, line)`` as ``calls_in_ir_json`` finds them) not allowed,
    the first of each ``(op, symbol)`` only."""
    seen, out = set(), []
    for op, symbol, *rest in calls:
        if (op, symbol) not in seen and not allowed(op, symbol, device):
            seen.add((op, symbol))
            out.append((op, symbol, rest[0] if rest else None))
    return out


def describe(op: str, symbol: str | None, line: int | None = None) -> str:
    """One call in words: ``calls the C function 'system' (tirx.call_extern, line 9)``."""
    if op == SYMBOL:
        shown = repr(symbol[:40]) + ("..." if len(symbol) > 40 else "")
        return f"names a function {shown} (its global_symbol), which is not a C identifier"
    if op.startswith(INJECTED_SOURCE):
        return f"pastes source code into the build through the '{op}' attribute{f' (line {line})' if line else ''}"
    what = "the C function" if op in EXTERN_OPS else "the function"
    name = f"'{symbol}'" if symbol is not None else "named by a computed value"
    return f"calls {what} {name} ({op}{f', line {line}' if line else ''})"


def refusal_message(calls: list[tuple], action: str = "built or run", device: bool = True) -> str | None:
    """One line saying why the program is not ``action``, or None when every call is allowed."""
    bad = refused(calls, device)
    if not bad:
        return None
    shown = "; ".join(describe(*call) for call in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"it {shown}{more}: ASight does not let a program that calls native code by name (or pastes in "
            f"source code) be {action} (only math functions, TVM's VM builtins and vendor libraries; docs/sandbox.md)")


# --------------------------------------------------------------------------- reading TVM's JSON form

def calls_in_ir_json(text: str) -> list[tuple[str, str | None, int | None]]:
    """Every call by name in a program saved with ``tvm.ir.save_json``: ``(op, symbol, line)``.

    The graph's nodes are ``{"type", "data"}``; a TIR or Relax call is an ``ir.Call`` whose ``op`` is
    an ``ir.Op``; a Relax ``R.call_packed`` & co. call a ``relax.expr.ExternFunc``.  ``symbol`` is the
    call's first literal string (None when it has none), ``line`` the call's source line when known.
    Reading the JSON here (not TVM's objects) keeps the rule testable without TVM."""
    import json

    nodes = json.loads(text).get("nodes") or []

    def node(index):
        return nodes[index] if isinstance(index, int) and 0 <= index < len(nodes) else {}

    def string(index):
        value = node(index).get("data")
        return value if isinstance(value, str) else None

    def line(data):
        span = node(data.get("span")).get("data")
        return span.get("line") if isinstance(span, dict) else None

    def args(data):
        return [i for i in (node(data.get("args")).get("data") or []) if isinstance(i, int)]

    every_call = [e["data"] for e in nodes if e.get("type") == "ir.Call" and isinstance(e.get("data"), dict)]
    calls = [c for c in every_call if node(c.get("op")).get("type") == "ir.Op"]
    extern_line = {i: line(c) for c in every_call for i in [c.get("op"), *args(c)]
                   if node(i).get("type") == "relax.expr.ExternFunc"}
    found = []
    for index, entry in enumerate(nodes):
        data = entry.get("data")
        if entry.get("type") == "ffi.String" and isinstance(data, str) and data.startswith(INJECTED_SOURCE):
            users = [e["data"] for e in nodes if isinstance(e.get("data"), dict) and e["data"].get("attr_key") == index]
            found.append((data, None, next((line(u) for u in users if line(u)), None)))
        if entry.get("type") == "relax.expr.ExternFunc" and isinstance(data, dict):
            found.append((EXTERN_FUNC, string(data.get("global_symbol")), extern_line.get(index) or line(data)))
    for data in calls:
        op = string(data.get("op"))
        if op is None or not is_native_call_op(op) or any(i in extern_line for i in args(data)):
            continue      # an ExternFunc's call is reported with the ExternFunc
        literal = next((string(node(i)["data"].get("value")) for i in args(data)
                        if node(i).get("type") == "ir.StringImm" and isinstance(node(i).get("data"), dict)), None)
        found.append((op, literal, line(data)))
    return found
