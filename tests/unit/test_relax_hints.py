"""Inlay hints on a profiled Relax function: one per kernel call, on that call's own last binding."""
from asight_lsp.server.inlay import call_hints
from asight_lsp.services.results import FunctionResult, profile_calls
from asight_lsp.services.catalogue import RunView
from asight_lsp.tvmscript.outline import build_outline

SOURCE = '''from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((1, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            a = R.matmul(x, w)
            b = R.nn.relu(a)
            c = R.matmul(b, w)
            d = R.nn.relu(c)
            R.output(d)
        return d
'''


def _profile(fn):
    lines = {b.name: b.range["start"]["line"] for b in fn.bindings}
    calls = [{"task": "fused_matmul_relu", "call": k, "vars": v, "us": us, "share": share,
              "lines": [lines[v[0]], lines[v[-1]]]}
             for k, (v, us, share) in enumerate([(["a", "b"], 3.0, 0.6), (["c", "d"], 2.0, 0.4)])]
    return {"relax": {"function": fn.id, "tasks": {"tuned": {"tasks": calls}}}}


def test_each_call_gets_a_hint_on_its_own_lines():
    fn = build_outline(SOURCE).function("M.main")
    calls = profile_calls(_profile(fn), fn)
    assert [c["program"] for c in calls] == ["tuned", "tuned"]
    result = FunctionResult(fn.id, RunView(None, None, "fresh"), calls=calls)
    hints = call_hints(result)
    lines = {b.name: b.range["start"]["line"] for b in fn.bindings}
    assert [h[0] for h in hints] == [lines["b"], lines["d"]]
    assert hints[0][1] == "60% · 3.00 µs · fused_matmul_relu" and hints[1][1].endswith("fused_matmul_relu#1")
    assert hints[1][1].startswith("40% · 2.00 µs") and "2.00 µs per call" in hints[1][2]   # the unit the rest uses
    big = FunctionResult(fn.id, RunView(None, None, "fresh"), calls=[{**calls[0], "us": 1771.4}, calls[1]])
    assert [h[1].split(" · ")[1] for h in call_hints(big)] == ["1.77 ms", "0.002 ms"]     # one unit per function
    assert "computes c, d" in hints[1][2]


def test_no_hints_without_a_relax_profile_of_that_function():
    fn = build_outline(SOURCE).function("M.main")
    assert profile_calls(None, fn) is None
    assert profile_calls({"relax": {"function": "Other.main", "tasks": {}}}, fn) is None


def test_binding_hover_has_type_and_its_kernel_call():
    from asight_lsp.server.hover import binding_lines
    fn = build_outline(SOURCE).function("M.main")
    calls = profile_calls(_profile(fn), fn)
    result = FunctionResult(fn.id, RunView(None, None, "fresh"), calls=calls)
    item = next(b for b in fn.bindings if b.name == "c")
    text = '            c: R.Tensor((1, 8), dtype="float32") = R.matmul(b, w)'
    lines = binding_lines(item, result, text)
    assert "- tensor: float32[1, 8]" in lines
    assert any("`fused_matmul_relu#1`: 2.00 µs (tuned build), 40.0 % of the kernel time" in line for line in lines)
    # with the untuned build timed too, the trials and the chosen schedule (issue 23)
    call = {**calls[1], "untuned_us": 3500.0, "trials": 12, "schedule": "matmul: parallel · 2 loops tiled (trial 7)"}
    rich = binding_lines(item, FunctionResult(fn.id, RunView(None, None, "fresh"), calls=[call]), text)
    assert any("untuned 3.50 ms → tuned 0.002 ms" in line for line in rich), rich     # one unit for both figures
    assert "- task `fused_matmul_relu`: 12 trials" in rich
    assert "- its schedule: matmul: parallel · 2 loops tiled (trial 7)" in rich
    assert any("no per-call profile" in line for line in binding_lines(item, FunctionResult(fn.id, RunView(None, None, "fresh"))))
