"""The stage graph of a Relax model at a deployer's scale (issue 23), without TVM: kernel calls as
nodes with per-call cost and share, their data flow as edges, weights and shape constants folded
away, namespace names never inputs; the binding-level graph folds the same way."""
from __future__ import annotations

from asight_lsp.analysis.stagegraph import build_graph, model_graph, num_input_of
from asight_lsp.tvmscript.outline import build_outline

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 8, 8), dtype="float32"), w1: R.Tensor((4, 4, 3, 3), dtype="float32"), b1: R.Tensor((4,), dtype="float32"), w2: R.Tensor((4, 4, 3, 3), dtype="float32"), fc: R.Tensor((10, 4), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            c1: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.conv2d(x, w1)
            bb: R.Tensor((1, 4, 1, 1), dtype="float32") = R.reshape(b1, R.shape([1, 4, 1, 1]))
            a1: R.Tensor((1, 4, 8, 8), dtype="float32") = R.add(c1, bb)
            r1: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.relu(a1)
            c2: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.conv2d(r1, w2)
            s: R.Tensor((1, 4, 8, 8), dtype="float32") = R.add(c2, r1)
            m: R.Tensor((1, 4, 1, 1), dtype="float32") = R.mean(s, axis=[2, 3], keepdims=True)
            f: R.Tensor((1, 4), dtype="float32") = R.reshape(m, R.shape([1, 4]))
            t: R.Tensor((4, 10), dtype="float32") = R.permute_dims(fc, axes=[1, 0])
            gv: R.Tensor((1, 10), dtype="float32") = R.matmul(f, t)
            R.output(gv)
        return gv
'''
CALLS = [  # the tuned build's kernel calls as the worker's VM instrument hook reports them
    {"task": "fused_conv2d_add_relu", "call": 0, "vars": ["c1", "a1", "r1"], "us": 40.0},
    {"task": "fused_conv2d_add", "call": 0, "vars": ["c2", "s"], "us": 30.0},
    {"task": "mean", "call": 0, "vars": ["m"], "us": 5.0},
    {"task": "transpose", "call": 0, "vars": ["t"], "us": 5.0},
    {"task": "matmul", "call": 0, "vars": ["gv"], "us": 20.0},
]


def _fn():
    outline = build_outline(SOURCE, "m.py")
    return outline.function("Module.main")


def _profile():
    calls = [{**c, "share": c["us"] / 100.0} for c in CALLS]
    return {"relax": {"function": "Module.main", "tasks": {"tuned": {"tasks": calls}},
                      "task_records": {"fused_conv2d_add_relu": {"trials": 12}, "matmul": {"trials": 0}}}}


def test_num_input_is_read_from_the_function():
    assert num_input_of(SOURCE, _fn()) == 1


def test_kernel_calls_and_their_data_flow():
    g = model_graph(_fn(), _profile(), num_input=1, task_info=_profile()["relax"]["task_records"])
    kernels = {n: a for n, a in g.nodes(data=True) if a["kind"] == "kernel"}
    assert set(kernels) == {"fused_conv2d_add_relu#0", "fused_conv2d_add#0", "mean#0", "transpose#0", "matmul#0"}
    conv = kernels["fused_conv2d_add_relu#0"]
    assert conv["cost"]["us"] == 40.0 and conv["cost"]["share"] == 0.4 and conv["trials"] == 12
    assert conv["bindings"] == ["c1", "a1", "r1"]
    assert kernels["transpose#0"]["weights_only"] is True
    edges = {(u, v, a["buffer"]) for u, v, a in g.edges(data=True)}
    assert edges == {
        ("input:x", "fused_conv2d_add_relu#0", "x"),
        ("fused_conv2d_add_relu#0", "fused_conv2d_add#0", "r1"),      # conv and the residual: one edge per pair
        ("fused_conv2d_add#0", "mean#0", "s"),
        ("mean#0", "matmul#0", "f"),                                  # the VM's reshape passes mean's value through
        ("transpose#0", "matmul#0", "t"),
        ("matmul#0", "output:gv", "gv"),
    }
    io = {n for n, a in g.nodes(data=True) if a["kind"] == "io"}
    assert io == {"input:x", "output:gv"}   # no weight, no `R`


def test_no_profile_no_kernel_graph():
    assert not model_graph(_fn(), None, 1).nodes


def test_binding_graph_folds_weights_and_never_takes_a_namespace_for_an_input():
    g = build_graph(_fn(), num_input=1)
    inputs = {a["label"] for _, a in g.nodes(data=True) if a.get("role") == "input"}
    assert inputs == {"x"}
    assert "bb" not in g and "t" not in g          # computed from weights alone: folded
    assert "R" not in inputs and not any("R" == a.get("label") for _, a in g.nodes(data=True))
    loose = build_graph(_fn())                      # without num_input every parameter is an input, still no `R`
    assert "input:R" not in loose and "input:w1" in loose


# ---------------------------------------------------------------- one rule for every surface (views.loops.graph_of)

BASE = {"run": {"id": "r1", "trials": 12, "task": None}, "notes": []}


def test_graph_of_a_profiled_model_is_its_kernel_calls():
    from asight_lsp.views.loops import graph_of
    g = graph_of(_fn(), SOURCE, BASE, _profile())
    assert g["status"] == "ok" and g["level"] == "model" and g["run"] == BASE["run"]
    assert [n["id"] for n in g["nodes"] if n["kind"] == "kernel"] == [f"{c['task']}#0" for c in CALLS]
    assert {n["id"] for n in g["nodes"] if n["kind"] == "io"} == {"input:x", "output:gv"}   # num_input from the text
    assert g["summary"].startswith("5 kernel calls of 5 tasks (tuned build)")


def test_graph_of_a_model_without_a_per_call_profile_is_its_bindings_and_says_so():
    from asight_lsp.views.loops import graph_of
    g = graph_of(_fn(), SOURCE, BASE, None)
    assert "level" not in g and {n["kind"] for n in g["nodes"]} == {"binding", "io"}
    assert all(n["cost"]["us"] is None for n in g["nodes"] if n["kind"] == "binding")
    assert any("no per-call profile" in note for note in g["notes"]) and BASE["notes"] == []   # base left as it was


def test_graph_of_before_any_run_is_the_source_map():
    """The editor's panel before a run (server/custom.py): bindings, no cost, no note, no run."""
    from asight_lsp.views.loops import graph_of, stage_graph_of
    g = graph_of(_fn(), SOURCE)
    assert g == stage_graph_of(_fn(), num_input=1)
    assert g["run"] is None and g["notes"] == [] and not any("cost" in n for n in g["nodes"])
    assert graph_of(_fn(), SOURCE, None, _profile())["nodes"] == g["nodes"]   # a profile without a run draws nothing


def test_cli_text_lists_the_kernel_calls_and_their_data_flow():
    from asight_lsp.commands.loops import render
    from asight_lsp.views.loops import graph_of
    profile = _profile()
    lines = {"fused_conv2d_add_relu": [7, 10], "transpose": [15, 15]}     # 0-based, as the worker reports them
    for call in profile["relax"]["tasks"]["tuned"]["tasks"]:
        call["lines"] = lines.get(call["task"])
    g = graph_of(_fn(), SOURCE, BASE, profile)
    view = {"function": "Module.main", "run": {"id": "r1", "measured": 12, "task": "mean"}, "stages": [], "notes": []}
    text = render(view, g)
    assert "stage graph of Module.main: 5 kernel calls of 5 tasks" in text and "kernel calls (5):" in text
    assert "  fused_conv2d_add_relu#0: one call · 12 trials · c1, a1, r1 (lines 8-11) · 40 µs, 40.0% of the program" \
        in text.splitlines(), text
    assert "  transpose#0: one call · weights only · t (line 16) · 5.0 µs" in text
    assert f"data flow ({len(g['edges'])} edges):" in text
    assert all(f"  {e['source']} --{e['buffer']}--> {e['target']}" in text.splitlines() for e in g["edges"])
    bindings = render(view, graph_of(_fn(), SOURCE, BASE, None))
    assert "note: no per-call profile of this run yet" in bindings and "buffer edges" in bindings
