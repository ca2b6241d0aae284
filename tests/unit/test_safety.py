"""The safety gate: hostile files are refused statically; real TVMScript passes."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asight_lsp.tvmscript.diagnostics import check_text
from asight_lsp.tvmscript.outline import build_outline
from tests.conftest import FIXTURES, fixture_text

HOSTILE = sorted(p.name for p in (FIXTURES / "hostile").glob("*.py"))
CLEAN = ["matmul.py", "matmul64.py", "matmul_bias_relu.py", "conv2d_nhwc.py", "depthwise_conv2d.py",
         "batch_matmul.py", "softmax.py", "relax_cnn.py"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_file_is_refused_statically(name):
    result = check_text(fixture_text(f"hostile/{name}"))
    refusals = [d for d in result.diagnostics if d["source"] == "safety"]
    assert refusals and all(d["message"].startswith("not evaluated:") for d in refusals)
    assert not any(u.safe for u in result.outline.units)
    assert result.outline.functions, "the function is still outlined statically"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_payload_really_is_hostile(name, tmp_path):
    """Guard against a toothless test: running the file with Python DOES create the marker."""
    env = dict(os.environ, PYTHONPATH=str(FIXTURES.parent))
    subprocess.run([sys.executable, str(FIXTURES / "hostile" / name)], cwd=tmp_path, env=env,
                   capture_output=True, timeout=120)
    if name == "import_in_body.py":  # its payload runs only when TVM's parser evaluates the body
        pytest.skip("payload is inside the function body")
    assert (tmp_path / "ASIGHT_PWNED").exists()


@pytest.mark.parametrize("name", CLEAN)
def test_fixtures_pass_the_gate(name):
    assert all(u.safe for u in build_outline(fixture_text(name)).units)


def test_refusal_points_at_the_offending_expression():
    result = check_text(fixture_text("hostile/decorator_call.py"))
    [diag] = [d for d in result.diagnostics if d["source"] == "safety"]
    line = fixture_text("hostile/decorator_call.py").splitlines()[diag["range"]["start"]["line"]]
    assert line[diag["range"]["start"]["character"]:].startswith("open(")


@pytest.mark.parametrize("snippet", [
    "A[0] = T.float32(len([x for x in range(4)]))",  # comprehension of safe calls is fine
    "A[0] = T.float32(min(1, 2))",
])
def test_harmless_python_is_allowed(snippet):
    text = f"@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    {snippet}\n"
    assert build_outline(text).units[0].safe


@pytest.mark.parametrize("snippet", [
    "A[0] = T.float32(eval('1'))",
    "A[0] = A.__class__",
    "A[0] = T._ffi_api",
    "A[0] = T.float32(getattr(T, 'x'))",
    "A[0] = T.float32(**{'x': 1})",
    "A[0] = T.float32((yield))",
    "A[0] = T.float32((x := 1))",
])
def test_dangerous_python_is_refused(snippet):
    text = f"@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    {snippet}\n"
    unit = build_outline(text).units[0]
    assert not unit.safe, snippet
