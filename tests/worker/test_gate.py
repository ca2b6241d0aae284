"""The gate with the real TVM: its API list is TVM's, its payloads are live, none of them ever runs
through ``asight check`` / ``asight outline``, and what TVM parses passes (docs/safety.md)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asight_lsp.tvmscript.diagnostics import check_text
from tests.conftest import FIXTURES, ROOT, fixture_text

pytestmark = pytest.mark.tvm

HOSTILE = sorted((FIXTURES / "hostile").glob("*.py"))
MARKER = "ASIGHT_PWNED"
# Their payload runs only as Python (module level or an import statement), never under TVM's parser.
PYTHON_ONLY = {"bound_name_call.py", "nonliteral_constant.py", "import_in_body.py",
               # a module-level macro exists only where Python ran its def (RAW_PARSE does not)
               "macro_body_call.py", "macro_default_arg.py", "macro_not_hygienic.py"}
# Their payload is a comment for Python; it ran where the worker sliced ``str.splitlines()`` (as RAW_PARSE
# still does), not the tokenizer's lines (issue 22).  Now nothing is refused and ``ok`` is checked.
ONE_TEXT = {p.name for p in HOSTILE if p.name.startswith("text_")}

RAW_PARSE = textwrap.dedent('''
    """Every unit of each file through TVM's parser as the worker would call it, but with no gate and
    no guard, slicing ``str.splitlines()`` as the worker did before issue 22: does the payload run?
    Prints {file: marker created}."""
    import json, os, sys, tempfile
    import tvm
    from tvm.script.parser.core.entry import _default_globals
    from asight_lsp.tvmscript.outline import build_outline
    fired = {}
    for path in sys.argv[1:]:
        text = open(path).read()
        outline = build_outline(text)
        lines = text.splitlines()
        here = tempfile.mkdtemp()
        os.chdir(here)
        for unit in outline.units:
            env = _default_globals()
            spaces = {k: env[k] for k in ("T", "R", "I", "Tx")}
            env.update({k: spaces[v] for k, v in outline.aliases.items() if v in spaces})
            env.update(outline.constants)
            try:
                tvm.script.from_source("\\n" * unit.start_line + "\\n".join(lines[unit.start_line:unit.end_line + 1]),
                                       extra_vars=env)
            except Exception:
                pass
        fired[os.path.basename(path)] = os.path.exists(os.path.join(here, "ASIGHT_PWNED"))
    print(json.dumps(fired))
''')


def test_the_committed_api_is_what_the_installed_tvm_defines():
    spec = importlib.util.spec_from_file_location("make_tvmscript_api", ROOT / "scripts" / "make_tvmscript_api.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    data = maker.derive()
    assert maker.render(data) == (ROOT / "asight_lsp" / "tvmscript" / "tvmscript_api.py").read_text()
    import types

    spaces = maker.namespaces()

    def resolve(path):
        root, *names = path.split(".")
        value = spaces[root]
        for name in names:
            value = getattr(value, name)
        return value

    for path in data["members"] + data["chains"]:  # values: never a module
        assert not isinstance(resolve(path), types.ModuleType), path
    for path in data["prefixes"]:  # sub-namespaces: TVMScript's own modules or namespace objects
        value = resolve(path)
        assert value.__name__.startswith("tvm.") if isinstance(value, types.ModuleType) else \
            type(value).__name__.endswith("Namespace"), path


@pytest.mark.slow
def test_the_payloads_are_live_without_the_gate(tmp_path):
    """Guard against a toothless corpus: with the gate off, TVM's parser (or Python) runs each one."""
    script = tmp_path / "raw_parse.py"
    script.write_text(RAW_PARSE)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TVM_NUM_THREADS="1")
    parsed = [str(p) for p in HOSTILE if p.name not in PYTHON_ONLY]
    proc = subprocess.run([sys.executable, str(script), *parsed], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    fired = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [name for name, hit in fired.items() if not hit] == []
    for name in sorted(PYTHON_ONLY - {"import_in_body.py"}):
        run_dir = tmp_path / name
        run_dir.mkdir()
        subprocess.run([sys.executable, str(FIXTURES / "hostile" / name)], cwd=run_dir, env=env,
                       capture_output=True, timeout=120)
        assert (run_dir / MARKER).exists(), name


@pytest.mark.slow
def test_no_payload_runs_through_check_or_outline(tmp_path, monkeypatch, capsys):
    """Every hostile file through the real CLI: one ``asight check`` process for them all (one worker, as a
    user checks a folder: a payload that ran in it would be there for every later file), and ``asight
    outline`` of each (static: the CLI's own ``main`` in this process, where a payload would run too)."""
    from asight_lsp.cli import main as asight
    checked = subprocess.run([sys.executable, "-m", "asight_lsp", "check", "--json", *map(str, HOSTILE)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 1, checked.stderr[-2000:]
    results = {Path(r["path"]).name: r for r in json.loads(checked.stdout)}
    assert sorted(results) == sorted(p.name for p in HOSTILE)
    for name, result in results.items():
        said = " ".join(d["message"] for d in result["diagnostics"])
        if name in ONE_TEXT:
            assert result["diagnostics"] == [] and len(result["parsed_units"]) == 1, (name, said)
        else:
            assert result["errors"] >= 1 and "not evaluated" in said, (name, said)
    monkeypatch.chdir(tmp_path)
    for path in HOSTILE:
        assert asight(["outline", str(path)]) == 0, path.name
        assert capsys.readouterr().out.strip(), path.name              # still outlined
    assert not list(tmp_path.rglob(MARKER))


def test_a_computed_shape_string_is_refused_when_relax_evaluates_it(worker, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = fixture_text("hostile/annot_computed_shape_string.py")
    result = check_text(text, "x.py", worker)
    [diag] = result.diagnostics
    assert diag["source"] == "tvmscript" and "not evaluated: in the shape string" in diag["message"]
    assert "__import__" in diag["message"] and result.parsed_units == []
    assert not (tmp_path / MARKER).exists()


@pytest.mark.parametrize("name", ["model_params.py", "model_params_meta.py", "model_consts_meta.py", "symbolic.py"])
def test_printed_modules_parse(name, worker):
    result = check_text(fixture_text(f"printed/{name}"), name, worker)
    assert result.parsed_units == ["Module"]
    assert not result.has_errors, result.diagnostics


def test_a_module_that_needs_omitted_metadata_is_one_diagnostic(worker):
    result = check_text(fixture_text("printed/model_consts.py"), "m.py", worker)
    assert result.parsed_units == [] and len(result.diagnostics) == 1
    assert "show_meta=True" in result.diagnostics[0]["message"]


def test_the_params_of_a_printed_module_are_dropped_not_guessed(worker):
    from asight_lsp.worker.parse import parse_unit
    from asight_lsp.tvmscript.outline import build_outline
    text = fixture_text("printed/model_params.py")
    outline = build_outline(text)
    unit = outline.units[0]
    mod = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                     outline.constants, outline.aliases)
    attrs = mod["main"].attrs
    assert int(attrs["num_input"]) == 1 and "params" not in attrs
    meta = fixture_text("printed/model_params_meta.py")
    outline = build_outline(meta)
    unit = outline.units[0]
    mod = parse_unit(meta.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                     outline.constants, outline.aliases)
    assert len(mod["main"].attrs["params"]) == 4  # with show_meta=True the weights are there


def test_check_well_formed_false_is_honoured_and_errors_stay_in_the_unit(worker):
    broken = fixture_text("broken/not_well_formed.py")
    quiet = broken.replace("@T.prim_func", "@T.prim_func(check_well_formed=False)", 1)
    assert "check_well_formed=False" in quiet
    assert check_text(quiet, "q.py", worker).diagnostics == []
    text = "# a comment\n\n\n" + broken
    for diag in check_text(text, "b.py", worker).diagnostics:
        unit = check_text(text).outline.units[0]
        assert unit.start_line <= diag["range"]["start"]["line"] <= unit.end_line


@pytest.mark.parametrize("text", [
    "import tvm\nfrom tvm.script import tirx as T\n\n@tvm.script.ir_module\nclass M:\n"
    "    @T.prim_func\n    def f(A: T.Buffer((8,), 'float32')):\n        A[0] = T.float32(0)\n",
    "import tvm\nfrom tvm.script import tirx as T\n\n@tvm.script.tirx.prim_func\n"
    "def f(A: T.Buffer((8,), 'float32')):\n    A[0] = T.float32(0)\n",
    "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\n\n@T.prim_func\n"
    "def f(A: T.Buffer((8,), 'float32')):\n"
    "    T.attr(T.comm_reducer(lambda a, b: a + b, [T.float32(0)]), 'reduce_scope', T.reinterpret('handle', T.uint64(0)))\n"
    "    A[0] = T.float32((lambda a: a + 1)(1))\n",
    "from tvm.script import relax as R\n\n@R.function\ndef main(x: R.Tensor((8,), 'float32'), "
    "f: R.Callable((R.Tensor((8,), 'float32'),), R.Tensor((8,), 'float32'))):\n"
    "    @R.function\n    def inner(y: R.Tensor((8,), 'float32')) -> R.Tensor((8,), 'float32'):\n"
    "        return y\n\n    z = inner(x)\n    w = f(z)\n    return w\n",
])
def test_what_tvm_parses_passes(text, worker):
    result = check_text(text, "ok.py", worker)
    assert result.diagnostics == [] and len(result.parsed_units) == 1


@pytest.mark.slow
def test_a_printed_model_without_its_metadata_tunes(tmp_path, monkeypatch):
    from asight_lsp.services.tuning import TuneRequest, start_tune
    monkeypatch.setenv("ASIGHT_TRIALS_PER_ITER", "2")
    source = tmp_path / "model.py"
    source.write_text(fixture_text("printed/model_params.py"))
    job = start_tune(TuneRequest(file=str(source), function="Module", trials=4, store_root=str(tmp_path), seed=0))
    meta = job.wait(600)
    assert meta.state == "done", meta.error
    assert meta.kind == "relax" and meta.trials_done == 4


@pytest.mark.parametrize("name", sorted(ONE_TEXT) + ["pagebreak"])
def test_the_worker_parses_the_lines_the_gate_read(name, worker, tmp_path, monkeypatch):
    """A comment holding a character ``str.splitlines()`` breaks at (issue 22): the worker parses the
    unit the gate read, at its lines (a payload that ran would be a diagnostic: the sandbox refuses
    its write; or the marker)."""
    monkeypatch.chdir(tmp_path)
    text = fixture_text("pagebreak.py" if name == "pagebreak" else f"hostile/{name}")
    result = check_text(text, "x.py", worker)
    assert result.diagnostics == []
    assert result.parsed_units == (["add_one", "scale"] if name == "pagebreak" else ["ok"])
    assert not (tmp_path / MARKER).exists()


@pytest.mark.parametrize("name,unit", [("module_macro.py", "scale"), ("module_constants.py", "matmul")])
def test_what_tvm_accepts_from_a_module_is_checked_and_parsed(name, unit, worker):
    """A module-level hygienic ``@T.macro`` (the worker defines it from the file's lines: an undefined
    one is TVM's "Undefined variable"), ``M, N = 16, 32`` and ``K = CONFIG["k"]`` (issue 22)."""
    result = check_text(fixture_text(name), name, worker)
    assert result.diagnostics == [] and result.parsed_units == [unit]
