"""Principles that lead somewhere: the closest ranges with a power estimate when nothing is
significant, and a next step (with its command) for every principle.  Pure, no TVM."""
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from asight_lsp.analysis.principle_mining import bh_adjusted, trials_to_settle
from asight_lsp.commands.principles import render
from asight_lsp.services.run_data import load_run
from asight_lsp.store.runs import Run
from asight_lsp.views.principles import principles

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128"


def _standardised(n, mean, rng):
    x = rng.normal(size=n)
    return (x - x.mean()) / x.std(ddof=1) + mean


def test_power_estimate_matches_the_textbook_sample_size():
    # d = 0.5, equal groups, one range tested at 5 %, power 0.8: 63 per group for a t-test (normal
    # approximation 62.8), / (3/pi) for Mann-Whitney = 65.8 per group -> 132 in all
    rng = np.random.default_rng(0)
    est = trials_to_settle(_standardised(20, 0.5, rng), _standardised(20, 0.0, rng), tested=1)
    z = 1.959964 + 0.841621
    assert est["effect_size_d"] == pytest.approx(0.5, abs=1e-3)
    assert est["candidates_needed"] == math.ceil(2 * z ** 2 / 0.25 / (3 / math.pi) * 2) == 132
    assert est["more_trials"] == 132 - 40
    assert "assumes" in est["note"]


def test_more_ranges_tested_or_a_smaller_effect_need_more_trials():
    rng = np.random.default_rng(1)
    a, b = _standardised(15, 0.8, rng), _standardised(25, 0.0, rng)
    one, many = trials_to_settle(a, b, tested=1), trials_to_settle(a, b, tested=100)
    smaller = trials_to_settle(_standardised(15, 0.4, rng), b, tested=100)
    assert one["candidates_needed"] < many["candidates_needed"] < smaller["candidates_needed"]
    none = trials_to_settle(np.ones(10), np.ones(10), tested=5)
    assert none["candidates_needed"] is None and none["more_trials"] is None


def test_bh_adjusted_values_reproduce_the_discoveries():
    p = np.array([0.001, 0.04, 0.03, 0.2, 0.011])
    q = bh_adjusted(p)
    assert q.tolist() == pytest.approx([0.005, 0.05, 0.05, 0.2, 0.0275])
    assert ((q <= 0.05) == np.array([True, True, True, False, True])).all()


@pytest.fixture()
def short_run(tmp_path):
    """The first 26 records of mbr128: nothing survives the FDR correction."""
    run_dir = tmp_path / "r26"
    shutil.copytree(RUN, run_dir)
    db = run_dir / "database_tuning_record.json"
    db.write_text("\n".join(db.read_text().splitlines()[:26]) + "\n")
    return Run(run_dir)


def test_when_nothing_is_significant_the_closest_ranges_say_what_would_settle_them(short_run):
    p = principles(load_run(short_run, extract=False))
    assert p["principles"] == [] and p["closest"]
    ps = [c["p_value"] for c in p["closest"]]
    assert ps == sorted(ps) and all(c["effect"] < 0 for c in p["closest"])
    assert all(c["p_adjusted"] > 0.05 for c in p["closest"])           # not significant after the correction
    first = p["closest"][0]
    need = first["settle"]["candidates_needed"]
    assert need > 26 and first["settle"]["more_trials"] == need - first["n"]
    step = first["next_step"]
    assert step["kind"] == "more-trials" and step["cli"].endswith(f"--trials {26 + first['settle']['more_trials']}")
    assert step["command"]["command"] == "asight.tune"
    text = render(p)
    assert "closest to significant:" in text and f"≈ {need:,} measured candidates would settle it" in text
    assert "$ asight tune" in text


def test_each_principle_is_a_next_step_with_the_guided_retune_command():
    p = principles(load_run(Run(RUN), extract=False))
    assert p["principles"] and p["closest"] == []
    step = p["principles"][0]["next_step"]
    assert step["kind"] == "guided-retune" and "--guided-by mbr128" in step["cli"]
    assert "--principles principle.json" in step["cli_alone"] and '"block":"matmul"' in step["cli_alone"]
    assert step["command"] == {"command": "asight.tune", "args": {"function": "MatmulBiasRelu.main",
                                                                 "guidedBy": "mbr128"}}
    assert "next: re-tune steered by this run's principles" in render(p)


def test_a_task_of_a_module_proposes_the_modules_budget():
    """A task with 42 of the module's 512 trials: the command names about 512 + more (scaled), never 42."""
    from types import SimpleNamespace
    from asight_lsp.views.principles import next_step
    meta = SimpleNamespace(file="resnet_relax.py", function="Module", trials_done=512, id="R1")
    data = SimpleNamespace(meta=meta, table=[0] * 42, task="fused_conv2d9_add", run=SimpleNamespace(id="R1"),
                           on_device=False)
    closest = next_step(data, {"settle": {"more_trials": 21}}, "closest")
    assert closest["cli"].endswith("--trials 768") and "of the module's 512 (this task had 42)" in closest["text"]
    guided = next_step(data, {"constraint": {}}, "principles")
    assert "--trials 512" in guided["cli"]
    assert "where that GPU is" not in guided["text"]
    data.on_device = True                  # a GPU run's re-tune runs where its GPU is (or over --rpc)
    assert "(where that GPU is, or with --rpc)" in next_step(data, {"constraint": {}}, "principles")["text"]
