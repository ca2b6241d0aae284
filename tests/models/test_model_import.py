"""A model built in code (two identical residual blocks) through TVM's real ONNX importer and
`asight import`: the printed file checks, its weights are the model's, and every call of a
repeated fused kernel maps to its own bindings (tune + profile through the real worker)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from asight_lsp.cli import main as asight

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
onnx_build = pytest.importorskip("onnx_build")

pytestmark = [pytest.mark.tvm]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """tiny_resnet.onnx imported with `asight import` (module-scoped: one import for the file)."""
    base = tmp_path_factory.mktemp("model")
    model = onnx_build.tiny_resnet(seed=3, size=8, width=4)
    onnx_build.save(model, base / "tiny.onnx")
    assert asight(["import", str(base / "tiny.onnx")]) == 0
    return base, model


def test_import_writes_a_file_every_command_accepts(imported, capsys):
    base, model = imported
    script = base / "tiny_relax.py"
    text = script.read_text()
    assert text.startswith("# Imported by `asight import tiny.onnx`")
    assert "metadata[" not in text and '"params"' not in text    # the values went to the weights file
    assert asight(["check", str(script)]) == 0
    assert "no problems" in capsys.readouterr().out
    from asight_lsp.tvmscript.outline import build_outline
    fn = build_outline(text, str(script)).function("Module.main")
    assert fn is not None and len(fn.bindings) >= 20
    # weights: one array per parameter after the input, named as the file names them, values as in ONNX
    weights = np.load(base / "tiny_relax.weights.npz")
    params = [b.name for b in fn.buffers if b.kind == "param"]
    assert params[0] == "input" and weights.files == params[1:]
    from onnx import numpy_helper
    init = {i.name.replace(".", "_"): numpy_helper.to_array(i) for i in model.graph.initializer}
    for name in weights.files:
        np.testing.assert_array_equal(weights[name], init[name])


def test_import_refuses_to_overwrite_and_bad_models(imported, capsys):
    base, _ = imported
    assert asight(["import", str(base / "tiny.onnx")]) == 2
    assert "exists (use --force" in capsys.readouterr().err
    (base / "bad.onnx").write_bytes(b"not a protobuf")
    assert asight(["import", str(base / "bad.onnx")]) == 1      # the input has errors (README)
    assert "is not a readable ONNX model" in capsys.readouterr().err
    assert not (base / "bad_relax.py").exists()
    assert asight(["import", str(base / "tiny.onnx"), "-o", str(base / "x.py"), "--shape", "input=a"]) == 2
    assert "integer dimensions" in capsys.readouterr().err


def _call_sites(script: Path, weights: Path | None = None):
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.parse import parse_unit
    from asight_lsp.worker.programs import measuring_target
    from asight_lsp.worker.relax_pipeline import deployable
    from asight_lsp.worker.relax_profile import call_sites
    from asight_lsp.worker.tune_plan import env_levers
    text = script.read_text()
    outline = build_outline(text)
    unit = outline.units[0]
    mod = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                     outline.constants, outline.aliases)
    mod, _ = deployable(mod, "main", str(weights) if weights else None)
    return call_sites(mod, measuring_target(None), True, off=env_levers())    # ASIGHT_LEVERS_OFF, as a job reads it


def test_calls_of_the_deployable_build_keep_their_bindings(imported, monkeypatch):
    """With the weights bound (the build tuned and exported), folded bias reshapes and the FC
    weight's transpose are no calls, and every fused call still finds all its own bindings (in the
    model's layout here; channels-last below)."""
    base = imported[0]
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "nhwc")
    unbound = _call_sites(base / "tiny_relax.py")
    bound = _call_sites(base / "tiny_relax.py", base / "tiny_relax.weights.npz")
    assert {s["callee"] for s in unbound} - {s["callee"] for s in bound} == {"reshape", "transpose"}
    kept = [s for s in unbound if s["callee"] not in ("reshape", "transpose")]
    folded = {v for s in unbound if s["callee"] in ("reshape", "transpose") for v in s["vars"]}
    assert [s["callee"] for s in bound] == [s["callee"] for s in kept]
    assert [s["vars"] for s in bound] == [[v for v in s["vars"] if v not in folded] for s in kept]
    assert all(s["vars"] for s in bound)
    monkeypatch.delenv("ASIGHT_LEVERS_OFF")
    nhwc = _call_sites(base / "tiny_relax.py", base / "tiny_relax.weights.npz")
    own = {v for s in bound for v in s["vars"]}
    every = [v for s in nhwc for v in s["vars"]]
    assert len(every) == len(set(every)) and own <= set(every)        # each binding in one call, none lost
    assert all(v in own or v.startswith("layout_transform") for v in every)
    assert [s["vars"] for s in nhwc if s["callee"].startswith("fused_conv2d")] == \
        [s["vars"] for s in bound if s["callee"].startswith("fused_conv2d")]


def test_each_call_of_a_repeated_kernel_has_its_own_bindings(imported):
    sites = _call_sites(imported[0] / "tiny_relax.py")
    by_callee: dict[str, list[list[str]]] = {}
    for site in sites:
        by_callee.setdefault(site["callee"], []).append(site["vars"])
    repeated = {k: v for k, v in by_callee.items() if len(v) > 1 and k.startswith("fused_conv2d")}
    assert len(repeated) == 2, by_callee        # conv+add+relu and conv+add+add+relu, twice each
    for calls in repeated.values():
        first, second = calls
        assert first and second and not set(first) & set(second)
    every = [v for s in sites for v in s["vars"]]
    assert len(every) == len(set(every))        # no binding claimed by two calls


@pytest.fixture(scope="module")
def tuned_run(job_tuned_tiny_resnet):
    """The model of ``imported`` (the tiny ResNet, seed 3) imported and tuned by a tuning job (12
    trials, one per batch, seed 0): the session's copy (tests/tuned_models.py) for this module."""
    from tests.tuned_models import latest_run
    base = job_tuned_tiny_resnet.checkout()
    return base / "tiny_relax.py", base / "store", latest_run(base / "store")


@pytest.mark.slow
def test_tuned_model_profile_maps_every_call(tuned_run):
    from asight_lsp.services.profiling import profile_file
    script, store, meta = tuned_run
    assert meta.state == "done", meta.error
    check = meta.measurement.get("check")     # may be none when every kernel kept its default schedule
    assert check is not None if meta.measurement["chosen"] else True
    assert check is None or check["ok"] is True, check
    profile = profile_file(str(script), run=meta.id, store_root=str(store))
    assert profile["options"]["weights"] == str(script.parent / "tiny_relax.weights.npz")
    tuned = profile["relax"]["tasks"]["tuned"]["tasks"]
    calls: dict[str, list] = {}
    for call in tuned:
        calls.setdefault(call["task"], []).append(call)
    repeated = [c for c in calls.values() if len(c) > 1]
    assert repeated
    for first, second, *_ in repeated:
        assert first["lines"] != second["lines"] and not set(first["vars"]) & set(second["vars"])
    _model_view_has_every_call(profile)
    _hotspots_map_every_call(script, meta.id, store, repeated)
    _export_runs(script, meta.id, store)
    _code_of_a_task(script, meta.id, store, repeated[0])
    _views_are_per_task(meta, store)


def _views_are_per_task(meta, store: Path):
    """Honeycomb and loop view of a model run show one task's candidates, never kernels mixed."""
    from asight_lsp.services.run_data import load_run
    from asight_lsp.views.searchspace import search_space
    hashes = {t["name"]: t["workload_hash"] for t in meta.tasks}
    assert all(hashes.values())
    data = load_run(meta.id, str(store), extract=False)
    assert data.task in hashes and data.tasks and set(data.tasks) <= set(hashes)   # tried tasks only (issue 23)
    assert data.tasks[0] == data.task                                               # the default: the largest share
    assert len(set(data.table.workload.tolist())) == 1
    other = next(name for name in hashes if name != data.task)
    data2 = load_run(meta.id, str(store), extract=False, task=other)
    assert data2.task == other and set(data2.table.workload.tolist()) != set(data.table.workload.tolist())
    payload = search_space(data, seed=0)
    assert payload["run"]["task"] == data.task


def _code_of_a_task(script: Path, run: str, store: Path, calls: list[dict]):
    """`asight code --task` shows that task's tuned kernel with every call site's bindings."""
    from asight_lsp.services.codeview import code_view
    task = calls[0]["task"]
    view = code_view(str(script), run=run, store_root=str(store), task=task)
    assert view["task"] == task and "T.prim_func" in view["text"] and view["candidate"]["trial"] is not None
    assert [s["vars"] for s in view["callSites"]] == [c["vars"] for c in calls]
    # each block of the kernel linked to the binding it computes in every call (issue 23)
    bound = {(link["call"], link["binding"]) for link in view["links"]}
    for k, call in enumerate(calls):
        assert {v for c, v in bound if c == k} <= set(call["vars"]) and any(c == k for c, _ in bound), (k, bound)
    firsts = {call["lines"][0] for call in calls}
    assert firsts <= {link["sourceLine"] for link in view["links"]}            # the conv binding of each call
    timed = [link for link in view["links"] if link.get("us") is not None]
    assert timed and view["blocks"], view["note"]                               # per-block times from the profile
    assert "no cached profile" not in view["note"] and f"{task}: {len(calls)} calls" in view["note"]
    with pytest.raises(Exception, match="pick one with --task"):
        code_view(str(script), run=run, store_root=str(store))
    _model_stage_graph(run, store, calls)


def _model_stage_graph(run: str, store: Path, calls: list[dict]):
    """The model's stage graph: one node per kernel call with its time, no weight, no `R`."""
    from asight_lsp.services.run_data import build_view
    from asight_lsp.store.runs import RunStore
    graph = build_view("stageGraph", RunStore(str(store)).get(run).path)
    assert graph["level"] == "model"
    kernels = [n for n in graph["nodes"] if n["kind"] == "kernel"]
    assert {n["task"] for n in kernels} >= {calls[0]["task"]} and all(n["cost"]["us"] > 0 for n in kernels)
    assert [n["id"] for n in graph["nodes"] if n["kind"] == "io" and n["role"] == "input"] == ["input:input"]
    assert graph["run"]["trials"] == 12


def _hotspots_map_every_call(script: Path, run: str, store: Path, repeated: list[list[dict]]):
    """`asight hotspots` ties each call of a repeated kernel to that call's own bindings and lines."""
    import json
    import subprocess
    out = subprocess.run([sys.executable, "-m", "asight_lsp", "hotspots", str(script), "--run", run,
                          "--work-dir", str(store), "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    entries = [e for part in json.loads(out.stdout)["parts"] for e in part["entries"]]
    for calls in repeated:
        task = calls[0]["task"]
        lines_of = {}
        for e in entries:
            for label in e.get("calls") or []:
                name, _, index = label.rpartition("#")
                if name == task:
                    lines_of.setdefault(int(index), set()).update(range(e["lines"][0], e["lines"][1] + 1))
        assert len(lines_of) == len(calls), (task, lines_of)
        assert not lines_of[0] & lines_of[1], (task, lines_of)   # the second call is not on the first's lines


def _model_view_has_every_call(profile: dict):
    from asight_lsp.views.model import model_view
    view = model_view(profile)
    assert view["status"] == "ok" and abs(sum(t["share"] for t in view["tasks"]) - 1.0) < 1e-3  # shares are rounded
    twice = [t for t in view["tasks"] if len(t["calls"]) == 2]
    assert twice and all(t["calls"][0]["lines"] != t["calls"][1]["lines"] for t in twice)
    assert all(t["untunedUs"] and t["trials"] for t in twice)
    assert model_view({"kernels": []})["status"] == "unavailable"


def _export_runs(script: Path, run: str, store: Path):
    """`asight export` writes a library that tvm.runtime.load_module + relax.VirtualMachine run."""
    import json
    import subprocess
    lib = store / "model.so"
    out = subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "--run", run, "-o", str(lib),
                          "--work-dir", str(store), "--json", "--tuned"],   # the tuned build, whatever a tiny
                         capture_output=True, text=True, timeout=600)     # model's headline said (untuned_wins)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["check"]["ok"] is True and reply["bound_weights"] == 12
    applied = reply["applied"]   # each kernel from its record, or its default where that re-measured faster
    assert len(applied["from_records"]) + len(applied["default_kept"]) == applied["kernels"] and applied["missing"] == []
    assert [i["name"] for i in reply["inputs"]] == ["input"]
    from asight_lsp.worker.compat import relax, tvm
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    assert vm["main"](tvm.runtime.tensor(x)).numpy().shape == (1, 10)
    bad = subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "-o", str(store / "y.so"),
                          "--work-dir", str(store / "empty")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no run of" in bad.stderr


def test_weights_listed_as_graph_inputs_are_weights(tmp_path, capsys):
    """Older exporters list every initializer as a graph input too (keep_initializers_as_inputs):
    TVM's importer declared it twice ("Variable w already defined"); the import keeps it a weight."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype("float32"), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert asight(["import", str(tmp_path / "m.onnx")]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "(1 weights" in out and "inputs: x: float32[2, 8]" in out
    with np.load(tmp_path / "m_relax.weights.npz") as data:
        assert np.array_equal(data[data.files[0]], numpy_helper.to_array(w))


def test_weights_computed_in_the_graph_become_weights(tmp_path, capsys):
    """An opset-9 model as old exporters wrote it: a convolution's weight computed in the graph
    (``ConstantOfShape`` times a ``Constant``), its bias an initializer listed as an input.  TVM's
    importer left the weight a constant the printer could only write as ``metadata[...]``; it is
    folded and written to the weights file, and the model computes as onnxruntime does."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((8, 3, 3, 3)).astype("float32"), rng.standard_normal(8).astype("float32")
    nodes = [helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array(w.shape, "int64"))),
             helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=numpy_helper.from_array(np.ones(1, "float32"))),
             helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(w)),
             helper.make_node("Mul", ["ones", "scale"], ["w"]),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    onnx.save(model, tmp_path / "old.onnx")
    assert asight(["import", str(tmp_path / "old.onnx"), "--no-check"]) == 0, capsys.readouterr().err
    assert "(2 weights" in capsys.readouterr().out
    script = tmp_path / "old_relax.py"
    text = script.read_text()
    assert "metadata" not in text.split("@I.ir_module")[1]
    assert asight(["check", str(script)]) == 0 and "no problems" in capsys.readouterr().out
    with np.load(tmp_path / "old_relax.weights.npz") as data:
        assert sorted(map(str, (data[k].shape for k in data.files))) == ["(8, 3, 3, 3)", "(8,)"]
    from asight_lsp.worker.compat import parse_script, relax, tvm
    from asight_lsp.worker.relax_pipeline import deployable
    mod, _ = deployable(parse_script(text[text.index("@I.ir_module"):]), "main", str(tmp_path / "old_relax.weights.npz"))
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    want = onnxruntime.InferenceSession(str(tmp_path / "old.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)


def test_relu6_with_bounds_as_initializers_imports_and_runs(tmp_path, capsys):
    """ONNX Clip with its bounds as initializers (MobileNet's ReLU6): TVM's importer makes non-finite
    constants that 0.27's printer writes as ``R.const("-inf", ...)`` and its parser rejects ("value has
    to be scalar or Tensor"); the import prints them so that they parse, and the model runs as ONNX."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(np.array(0, "float32"), "lo"), numpy_helper.from_array(np.array(6, "float32"), "hi")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "r6.onnx")
    assert asight(["import", str(tmp_path / "r6.onnx"), "--no-check"]) == 0, capsys.readouterr().err
    script = tmp_path / "r6_relax.py"
    text = script.read_text()
    assert 'R.const(float("-inf"), "float32")' in text and 'R.const("-inf"' not in text
    assert asight(["check", str(script)]) == 0 and "no problems" in capsys.readouterr().out
    from asight_lsp.worker.compat import parse_script, relax, tvm
    from asight_lsp.worker.relax_pipeline import deployable
    mod, _ = deployable(parse_script(text[text.index("@I.ir_module"):]), "main", str(tmp_path / "r6_relax.weights.npz"))
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x = np.linspace(-10, 10, 16, dtype="float32").reshape(2, 8)
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), np.clip(x, 0, 6))


def test_shapes_given_as_integer_initializers_are_folded_at_import(tmp_path, capsys):
    """Expand and Reshape whose shapes are initializers (and Pad's pads): kept as parameters, TVM's
    importer emitted an impure ``tensor_to_shape`` call its own parser refused ("not well-formed");
    as constants the shapes fold and the model runs as ONNX."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "exs"], ["e"]),
         helper.make_node("Pad", ["e", "pads"], ["p"], mode="constant"),
         helper.make_node("Reshape", ["p", "shp"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 30])],
        [numpy_helper.from_array(np.array([2, 3, 4], "int64"), "exs"),
         numpy_helper.from_array(np.array([0, 1, 0, 0, 1, 2], "int64"), "pads"),
         numpy_helper.from_array(np.array([2, -1], "int64"), "shp")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "ex.onnx")
    assert asight(["import", str(tmp_path / "ex.onnx"), "--no-check"]) == 0, capsys.readouterr().err
    text = (tmp_path / "ex_relax.py").read_text()
    assert "tensor_to_shape" not in text
    from asight_lsp.worker.compat import parse_script, relax, tvm
    from asight_lsp.worker.relax_pipeline import deployable
    mod, _ = deployable(parse_script(text[text.index("@I.ir_module"):]), "main", str(tmp_path / "ex_relax.weights.npz"))
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x = np.arange(8, dtype="float32").reshape(2, 1, 4)
    expected = np.pad(np.broadcast_to(x, (2, 3, 4)), ((0, 0), (1, 1), (0, 2))).reshape(2, -1)
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


def test_a_float16_model_is_compared_at_half_precision(tmp_path, capsys):
    """A float16 model (conv, pool, a 288-long matmul): two correct programs differ by ~1e-2 relative
    there, and the tuned build was reported "outputs differ" at float32's 1e-3.  A half-precision
    output is compared at 1e-2, said per buffer; a float32 one keeps 1e-3."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from asight_lsp.store.runs import RunStore
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("MatMul", ["f", "wm"], ["y"])]
    graph = helper.make_graph(nodes, "fp16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 5])],
                              [numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.2).astype("float16"), "w"),
                               numpy_helper.from_array((rng.standard_normal((288, 5)) * 0.1).astype("float16"), "wm")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "h.onnx")
    assert asight(["import", str(tmp_path / "h.onnx"), "--no-check"]) == 0, capsys.readouterr().err
    store = tmp_path / ".asight"
    assert asight(["tune", str(tmp_path / "h_relax.py"), "--trials", "8", "--no-profile", "--work-dir", str(store)]) == 0
    assert "outputs differ" not in capsys.readouterr().out
    check = RunStore(str(store)).get("latest").load().measurement["check"]
    out = check["buffers"][0]
    assert check["ok"] and out["dtype"] == "float16" and out["rtol"] == 0.01
    from asight_lsp.worker.inputs import compare_outputs
    ref = np.linspace(1, 2, 8)
    near = ref * (1 + 3e-3)
    assert compare_outputs(["a"], [ref.astype("float16")], [near.astype("float16")])["ok"]
    assert not compare_outputs(["a"], [ref.astype("float32")], [near.astype("float32")])["ok"]


def test_a_symbolic_input_gets_the_shape_fix_at_import(tmp_path, capsys):
    """An ONNX input with a named dimension imports, but tuning refuses it: the import says so and
    prints the command that fixes it, not `asight tune` (which would fail)."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "d.onnx")
    assert asight(["import", str(tmp_path / "d.onnx")]) == 0
    out = capsys.readouterr().out
    assert "x has symbolic dimensions" in out and "--shape x=1,8" in out and "asight tune" not in out
    fixed = tmp_path / "fixed.py"
    assert asight(["import", str(tmp_path / "d.onnx"), "-o", str(fixed), "--shape", "x=4,8", "--no-check"]) == 0
    assert "inputs: x: float32[4, 8]" in capsys.readouterr().out


def test_shape_and_output_mistakes_are_refused_and_odd_names_stay_comments(tmp_path, capsys):
    """Found by an outside tester: --shape for an input the model lacks, of another rank, over a fixed
    size, or with a size below 1 went through; `-o` naming the model replaced it; a model file whose
    name held a line break put a live statement into the header comment."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])])
    model = tmp_path / "d.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    for shape, words in (("y=1,8", "the model has no input named 'y' (its inputs: x)"),
                         ("x=1,8,1", "the input has 2 dimensions"),
                         ("x=1,9", "dimension 1 of x is fixed at 8 in the model, not 9"),
                         ("x=0,8", "every dimension must be 1 or more")):
        assert asight(["import", str(model), "-o", str(tmp_path / "o.py"), "--force", "--shape", shape]) == 2
        assert words in capsys.readouterr().err, shape
    assert not (tmp_path / "o.py").exists()
    assert asight(["import", str(model), "-o", str(model), "--force"]) == 2
    assert "is the model itself" in capsys.readouterr().err and model.read_bytes()[:2] != b"# "
    odd = tmp_path / "m\nimport os; os.system('touch PWNED')\n.onnx"
    odd.write_bytes(model.read_bytes())
    assert asight(["import", str(odd), "-o", str(tmp_path / "odd.py"), "--shape", "x=1,8", "--no-check"]) == 0, \
        capsys.readouterr().err
    head = (tmp_path / "odd.py").read_text().split("@I.ir_module")[0]
    assert all(line.startswith(("#", "from ", "import ")) or not line.strip() for line in head.splitlines())
    assert "import os; os.system" not in [line.strip() for line in head.splitlines()]
