"""Red team, round 5 (docs/sandbox.md, "Building and running a file"): tuning ran the native code a file
names, and the processes that build and run programs (the tuning job, its runner, the trusted workers
of export and profile) parsed the text themselves, outside the sandbox.

* ``asight tune`` refuses a program that calls a native function by a name not allowed
  (``T.call_extern("int32", "system", …)``, ``T.call_packed("ffi.ModuleLoadFromFile", …)``,
  ``R.call_pure_packed``): one line naming the callee and its line, nothing run.
* A process without the sandbox never evaluates the text: ``parse_unit`` there asks a sandboxed worker.
* The tuning runner runs each candidate in a sandboxed worker (``candidate_runner.SandboxedRunner``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.redteam import TIR

pytestmark = pytest.mark.tvm

ROOT = Path(__file__).resolve().parents[2]

EXTERN = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def k(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("b"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] + T.Cast("float32", {call})
'''
RELAX = '''from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class M:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("b"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((16,), "float32")) -> R.Tensor((16,), "float32"):
        cls = M
        y = R.call_tir(cls.add, (x,), out_ty=R.Tensor((16,), "float32"))
        z = R.call_pure_packed("ffi.ModuleLoadFromFile", "{lib}", ty_args=R.Object())
        return y
'''


def asight(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


LLVM = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def k(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    with T.attr(0, "pragma_import_llvm", {ir!r}):
        for i in range(16):
            with T.sblock("b"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.call_extern("float32", "__nv_pwn", A[vi])
'''


def llvm_ir(marker: Path) -> str:
    """LLVM IR defining ``__nv_pwn`` (a device-library-looking name) as a call to system()."""
    command = f"touch {marker}"
    return (f'@.c = private unnamed_addr constant [{len(command) + 1} x i8] c"{command}\\00"\n'
            "declare i32 @system(ptr)\n"
            "define float @__nv_pwn(float %x) {\n  %r = call i32 @system(ptr @.c)\n  ret float %x\n}\n")


SYMBOL_NAME = '\n#ifndef PWN\n#define PWN\n(void* a, void* b, int c, void* d);\nextern "C" int system(const char*);\n' \
    '__attribute__((constructor)) static void pwn(void){{system("touch {marker}");}}\nint k_\n#endif\n'


@pytest.mark.parametrize("case", ["system", "packed", "relax", "llvm", "symbol"])
def test_tune_refuses_a_program_that_calls_native_code_by_name(tmp_path, case):
    marker = tmp_path / "pwned"
    if case == "system":
        text, callee, line = EXTERN.format(call=f'T.call_extern("int32", "system", "touch {marker}")'), "'system'", 9
    elif case == "packed":
        text, callee, line = EXTERN.format(call=f'T.call_packed("ffi.ModuleLoadFromFile", "{marker}.so")'), \
            "'ffi.ModuleLoadFromFile'", 9
    elif case == "relax":
        text, callee, line = RELAX.format(lib=f"{marker}.so"), "'ffi.ModuleLoadFromFile'", 19
    elif case == "llvm":      # red team round 5, second pass: source pasted in through an attribute
        text, callee, line = LLVM.format(ir=llvm_ir(marker)), "'pragma_import_llvm'", 6
    else:      # round 7: C source in a global_symbol, for TVM's C code generator (now refused as a target too)
        text = EXTERN.format(call="T.float32(0)").replace(
            "    for i in range(16):", f"    T.func_attr({{'global_symbol': {SYMBOL_NAME.format(marker=marker)!r}}})\n"
                                       "    for i in range(16):")
        callee, line = "not a C identifier", 4
    source = tmp_path / "k.py"
    source.write_text(text)
    checked = asight("check", str(source), cwd=tmp_path, env={"ASIGHT_HOME": str(tmp_path / "home")})
    assert checked.returncode == 0, checked.stdout + checked.stderr      # parsing it is harmless...
    warning = [ln for ln in checked.stdout.splitlines() if ": warning: " in ln]   # ...and the editor warns
    assert len(warning) == 1 and warning[0].startswith(f"{source}:{line}:") and callee in warning[0], checked.stdout
    tuned = asight("tune", str(source), "--trials", "2", cwd=tmp_path, env={"ASIGHT_HOME": str(tmp_path / "home")})
    assert tuned.returncode == 1, tuned.stdout + tuned.stderr
    error = [ln for ln in tuned.stderr.splitlines() if ln.startswith("asight: error:")]
    assert len(error) == 1 and callee in error[0] and f"{source}:{line}:" in error[0], tuned.stderr
    assert "native code by name" in error[0]
    assert not marker.exists() and not Path(f"{marker}.so").exists()


def test_a_process_without_the_sandbox_never_evaluates_the_text(tmp_path):
    """The pytest process is unsandboxed, as the tuning job and the trusted workers are: parse_unit there
    has a sandboxed worker parse the unit.  The gate-bypassing carrier tries to write a file: in the
    sandbox it cannot, and the parse fails with the sandbox's refusal instead."""
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.pysource import source_lines
    from asight_lsp.worker import parse
    from asight_lsp.worker.sandbox import STATUS
    assert not STATUS.active
    marker = tmp_path / "evaluated-here"
    text = TIR.format(src=f"open({str(marker)!r}, 'w').write('x')")
    outline = build_outline(text, "evil.py")
    unit = outline.units[0]
    with pytest.raises(parse.SandboxedParseError) as raised:
        parse.parse_unit(source_lines(text), {"start_line": unit.start_line, "end_line": unit.end_line}, {}, {})
    assert "ermission" in str(raised.value) or "not permitted" in str(raised.value), str(raised.value)
    assert not marker.exists()
    # and a clean unit comes back whole, as TVM's JSON loaded here
    clean = (ROOT / "fixtures" / "matmul.py").read_text()
    clean_outline = build_outline(clean, "matmul.py")
    first = clean_outline.units[0]
    module = parse.parse_unit(source_lines(clean), {"start_line": first.start_line, "end_line": first.end_line},
                              clean_outline.constants, clean_outline.aliases)
    assert [gv.name_hint for gv in module.get_global_vars()] == ["main"]
    assert [int(x) for x in module["main"].params[2].shape] == [256, 256]


def _system_library(tmp_path: Path, marker: Path) -> str:
    """A kernel that calls system(), compiled and exported as the tuning job's builder does."""
    from asight_lsp.worker.compat import parse_script
    from asight_lsp.worker.builder import export_shared
    from asight_lsp.worker.metaschedule import resolve_target
    text = EXTERN.format(call=f'T.call_extern("int32", "system", "touch {marker}")')
    start = text.index("@T.prim_func")
    func = parse_script("\n" * text[:start].count("\n") + text[start:], {}, {"T": "tirx"})   # no rule asked here
    import tvm       # tvm.tirx.build, not the builder's fast_build: that refuses it (the rule, above)
    return export_shared(tvm.tirx.build(tvm.IRModule({"main": func}), target=resolve_target(None)))


def _run(runner, artifact: str):
    from asight_lsp.worker.compat import ms
    args = [ms.arg_info.TensorInfo("float32", [16]), ms.arg_info.TensorInfo("float32", [16])]
    return runner.run([ms.runner.RunnerInput(artifact, "cpu", args)])[0].result()


def test_the_runner_runs_each_candidate_in_the_sandbox(tmp_path):
    from asight_lsp.worker.compat import ms
    from asight_lsp.worker.metaschedule import evaluator_config, make_runner
    marker = tmp_path / "ran-system"
    artifact = _system_library(tmp_path, marker)
    runner = make_runner()
    try:
        result = _run(runner, artifact)
        assert runner.worker().sandbox["active"] is True
    finally:
        runner.close()
    assert result.error_msg is None and result.run_secs, result.error_msg    # the kernel ran...
    time.sleep(0.5)
    assert not marker.exists()                                                # ...and system() could not
    # control: the same library in MetaSchedule's own runner does run the command
    plain = ms.runner.LocalRunner(timeout_sec=30, evaluator_config=evaluator_config())
    assert _run(plain, _system_library(tmp_path, marker)).error_msg is None
    deadline = time.time() + 5
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert marker.exists()


KERNEL = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def k(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"global_symbol": "k", "tir.noalias": True})
    for i in range(64):
        with T.sblock("b"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)
'''


def test_a_tampered_record_that_pastes_in_source_is_never_built(tmp_path):
    """Red team round 6: a run's records file is plain JSON (a cloned repository can ship one).  A record
    whose trace annotates a loop with ``pragma_import_llvm`` made `asight export` / `profile --cachegrind`
    run that IR as root; every build of a scheduled program now refuses it."""
    from asight_lsp.store.runs import RunStore
    from asight_lsp.worker.compat import ms, s_tir, tvm
    source = tmp_path / "k.py"
    source.write_text(KERNEL)
    home = {"ASIGHT_HOME": str(tmp_path / "home")}
    assert asight("tune", str(source), "--trials", "2", cwd=tmp_path, env=home).returncode == 0
    run = RunStore(str(tmp_path / "home")).get("latest")
    db = ms.database.JSONDatabase(work_dir=str(run.path))
    record = db.get_all_tuning_records()[0]
    sch = s_tir.Schedule(record.workload.mod)
    (loop,) = sch.get_loops(sch.get_sblock("b"))
    marker = tmp_path / "pasted-in-ran"
    sch.annotate(loop, "pragma_import_llvm", llvm_ir(marker).replace("@__nv_pwn(float %x)", "@unused(float %x)"))
    tampered = ms.database.TuningRecord(sch.trace, record.workload, [1e-9], record.target, record.args_info)
    records = run.path / "database_tuning_record.json"      # every record replaced, as a shipped file would be
    lines = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    records.write_text("".join(json.dumps([index, json.loads(json.dumps(tampered.as_json()))]) + "\n"
                               for index, _ in lines))
    del db
    profiled = asight("profile", str(source), "--no-cache", cwd=tmp_path, env=home)
    assert profiled.returncode != 0 and "pastes source code into the build through the 'pragma_import_llvm'" \
        in profiled.stderr, profiled.stdout + profiled.stderr
    assert not marker.exists()


def test_a_design_space_that_pastes_in_source_is_refused_before_any_trial(tmp_path):
    """The space function runs in the sandbox, but what it schedules is built outside: a trace that
    annotates ``pragma_import_llvm`` is refused up front (red team round 6, s03)."""
    source = tmp_path / "space.py"
    source.write_text(KERNEL + '''

def space(sch):
    (loop,) = sch.get_loops(sch.get_sblock("b"))
    sch.sample_perfect_tile(loop, n=2, max_innermost_factor=16)
    sch.annotate(loop, "pragma_" + "import_llvm", "define void @x() { ret void }")
''')
    proc = asight("tune", str(source), "--space", "space", "--trials", "2", cwd=tmp_path,
                  env={"ASIGHT_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "design space 'space': it pastes source code into the build through the 'pragma_import_llvm'" in proc.stderr
    assert " 1/2 trials" not in proc.stdout      # no progress line: nothing was measured


CONSTRUCTOR = '#include <stdlib.h>\n__attribute__((constructor)) static void pwn(void) { system("touch {marker}"); }\n'


def test_exports_output_check_loads_the_library_in_the_sandbox(tmp_path):
    """Loading a library runs its code (its constructors, its kernels' stores): `asight export`'s output
    check loads the written library in a sandboxed worker (``services/export.library_worker``), not in
    the trusted worker that linked it.  Control: the same request to an unsandboxed worker runs it."""
    from asight_lsp.engine import wire
    from asight_lsp.engine.client import WorkerClient, trusted
    from asight_lsp.errors import WorkerError
    from asight_lsp.services.export import library_worker
    from asight_lsp.tvmscript.outline import build_outline
    marker = tmp_path / "ran-constructor"
    (tmp_path / "pwn.c").write_text(CONSTRUCTOR.replace("{marker}", str(marker)))
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "model.so"), str(tmp_path / "pwn.c")], check=True)
    text = (ROOT / "fixtures" / "relax_cnn.py").read_text()
    outline = build_outline(text, "relax_cnn.py")
    params = {**wire.source_params(text, outline, outline.units[0]), "library": str(tmp_path / "model.so"),
              "target": None, "weights": None, "function": "main"}
    with library_worker(None, None) as worker:
        assert isinstance(worker, WorkerClient) and worker.request("ping")["sandbox"]["active"] is True
        with pytest.raises(WorkerError):                # not a TVM library: refused after the dlopen...
            worker.request(wire.CHECK_EXPORT, params, timeout=300)
    time.sleep(0.5)
    assert not marker.exists()                          # ...whose constructor could not run a command
    with trusted(None, 300) as unsandboxed, pytest.raises(WorkerError):
        unsandboxed.request(wire.CHECK_EXPORT, params, timeout=300)
    assert marker.exists()                              # the payload is live outside the sandbox
