"""Which workload is which task, and which task a view of a several-task run shows (pure)."""
import pytest

from asight_lsp.analysis.tasks import default_task, pick_task, task_workloads

TASKS = [{"name": "conv", "weight": 2.0, "workload_hash": "111"}, {"name": "mean", "weight": 1.0, "workload_hash": "222"},
         {"name": "old", "weight": 1.0}]
HASHES = ["222", "111", "333"]
RECORDS = [{"workload": w} for w in (0, 1, 1, 0, 2, 1)]


def test_workloads_by_hash_then_by_chosen_records():
    assert task_workloads(TASKS, HASHES) == {"conv": 1, "mean": 0}
    chosen = [{"task": "old", "workload": 2}, {"task": "conv", "workload": 0}]   # the hash wins for conv
    assert task_workloads(TASKS, HASHES, chosen) == {"conv": 1, "mean": 0, "old": 2}


def test_default_is_the_task_taking_most_tuned_time():
    workloads = {"conv": 1, "mean": 0}
    chosen = [{"task": "conv", "measured_us": 10.0}, {"task": "mean", "measured_us": 15.0}]
    assert default_task(TASKS, workloads, RECORDS, chosen) == "conv"      # 2 calls x 10 > 15
    assert default_task(TASKS, workloads, RECORDS, None) == "conv"        # most trials without a record


def test_pick_checks_the_name_and_single_task_runs_need_none():
    workloads = {"conv": 1, "mean": 0}
    assert pick_task(TASKS, workloads, RECORDS, None, "mean") == "mean"
    with pytest.raises(ValueError, match="no task 'x' in this run .tasks: conv, mean"):
        pick_task(TASKS, workloads, RECORDS, None, "x")
    assert pick_task(TASKS, workloads, [{"workload": 0}], None, None) is None


def test_tune_progress_of_a_model_names_the_task_and_labels_the_sum():
    from asight_lsp.commands.tune import progress_line
    line = progress_line({"trials_done": 3, "trials": 9, "best_us": 449.0, "task": "reshape", "task_best_us": 0.05})
    assert "task reshape: best 0.05 µs" in line and "runner estimate: 449.0 µs" in line
    assert "best so far 12.0 µs" in progress_line({"trials_done": 1, "trials": 9, "best_us": 12.0, "task": "main"})


def test_the_picker_offers_tried_tasks_by_share():
    from asight_lsp.analysis.tasks import ordered_tasks
    tasks = [{"name": "conv", "weight": 2}, {"name": "dense", "weight": 1}, {"name": "reshape", "weight": 5},
             {"name": "add", "weight": 1}]
    workloads = {"conv": 0, "dense": 1, "reshape": 2, "add": 3}
    records = [{"workload": 0}, {"workload": 0}, {"workload": 1}, {"workload": 3}]   # reshape: no trial
    chosen = [{"task": "conv", "measured_us": 10.0}, {"task": "dense", "measured_us": 50.0}]
    assert ordered_tasks(tasks, workloads, records, chosen) == ["dense", "conv", "add"]


def test_a_measurement_that_kept_every_default_is_not_no_measurement():
    """``--compare-onnx`` timed the run's fastest trials where the measurement had kept every default
    schedule (chosen: []), i.e. not what `asight export` ships (model probe round 5: "1.93x slower"
    where the shipped library ran 2x faster)."""
    from asight_lsp.services.lookup import chosen_records
    from asight_lsp.store.runs import RunMeta
    meta = RunMeta(id="r", file="f.py", function="main")
    assert chosen_records(None) is None and chosen_records(meta) is None
    meta.measurement = {"chosen": [], "defaults": [{"task": "fused_matmul"}]}
    assert chosen_records(meta) == []
    meta.measurement = {"chosen": [{"task": "t", "trial": 3}]}
    assert chosen_records(meta) == [{"task": "t", "trial": 3}]
