"""Where the next trials go (analysis/budget.py, pure)."""
import pytest

from asight_lsp.analysis import budget


def task(best, weight=1.0, trials=32, history=None, done=False, floor=None, batches=1):
    return {"best_us": best, "weight": weight, "trials": trials, "history": history or [], "done": done,
            "floor_us": floor, "batches": batches}


def test_warm_up_first_in_plan_order_then_failures_wait():
    tasks = [task(100.0), task(None, batches=0), task(None, batches=0)]
    assert budget.next_task(tasks, 8) == 1
    tasks[1] = task(None, batches=budget.WARMUP_BATCHES)            # failed twice: waits
    assert budget.next_task(tasks, 8) == 2
    assert budget.next_task([task(1.0, done=True), task(None, done=True)], 8) is None


def test_every_task_gets_its_first_batch_before_any_task_a_second():
    """A task left without a trial is a kernel `asight export` refuses: a failed first batch waits
    until every later task (the lightest come last in plan order) had one."""
    tasks = [task(None, batches=1), task(None, batches=0)]
    assert budget.next_task(tasks, 8) == 1
    tasks[1] = task(5.0, batches=1)
    assert budget.next_task(tasks, 8) == 0                         # then the retry


def test_the_batch_goes_where_it_saves_most_end_to_end():
    # the same trials and progress: the task holding more of the model's time wins (calls x latency)
    heavy, light = task(2160.0, weight=2), task(550.0, weight=2)
    assert budget.next_task([light, heavy], 32) == 1
    # a task still improving steeply beats a bigger one that has stalled (and has had many trials)
    stalled = task(1000.0, trials=400, history=[(368, 1000.0), (400, 1000.0)])
    falling = task(600.0, trials=64, history=[(32, 900.0), (64, 600.0)])
    assert budget.observed_rate(falling["history"]) == pytest.approx((300 / 900) / 32)
    assert budget.next_task([stalled, falling], 32) == 1
    # a task at its floor (FLOPs at peak) is not worth trials however large its share
    at_floor = task(5000.0, floor=5000.0)
    assert budget.gap(at_floor) == 0.0 and budget.expected_saving_us(at_floor, 32) == 0.0
    assert budget.next_task([at_floor, task(10.0)], 32) == 1
    # ties keep plan order
    assert budget.next_task([task(10.0), task(10.0)], 8) == 0


def test_prior_decays_with_trials_and_outlook_reports_it():
    fresh, old = task(100.0, trials=4), task(100.0, trials=396)
    assert budget.rate(fresh) == pytest.approx(budget.PRIOR / 8)
    assert budget.rate(old) == pytest.approx(budget.PRIOR / 400)
    assert budget.expected_saving_us(fresh, 8) > budget.expected_saving_us(old, 8) > 0
    rows = budget.outlook(["a", "b", "c"], [fresh, old, task(None, batches=0)], 8)
    assert [r["task"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["share"] == pytest.approx(0.5) and rows[2]["share"] == 0.0
    assert rows[0]["expectedSavingUs"] == pytest.approx(100.0 * (1 - (1 - budget.PRIOR / 8) ** 8))
    assert rows[0]["expectedSavingShare"] == pytest.approx(rows[0]["expectedSavingUs"] / 200.0)
    assert budget.outlook(["x"], [task(None)], 8)[0]["share"] is None


def test_the_warm_up_leaves_most_of_the_budget_to_the_share_rule():
    """A model's batch: one batch a task fits the budget, and takes about a third of it, so the rest
    goes where the measured shares say (ResNet-18: 19 tasks)."""
    from asight_lsp.analysis.budget import batch_size
    for trials, tasks in [(512, 19), (2048, 19), (256, 19), (128, 6)]:
        batch = batch_size(trials, tasks)
        assert 4 <= batch <= 32 and batch * tasks <= trials / 2, (trials, tasks, batch)
    assert batch_size(512, 19) == 8 and batch_size(100_000, 19) == 32
    assert batch_size(40, 19) == 2 and batch_size(9, 6) == 1       # tiny budgets: every task still tried
    assert batch_size(32, 1) == 16 and batch_size(4, 1) == 8       # one task: at least two batches


def test_a_floor_above_the_measured_best_is_no_floor():
    """A floor that counts more work than the kernel does (TVM's FLOPs of a Winograd kernel count its
    transforms) sat above the measured best: the rule expected nothing from more trials."""
    wrong = task(800.0, floor=1200.0)
    assert budget.gap(wrong) == 1.0 and budget.expected_saving_us(wrong, 8) > 0
    assert budget.gap(task(800.0, floor=200.0)) == pytest.approx(0.75)


def test_no_task_holding_a_real_share_of_the_model_starves():
    # 10 % of the model, 17 trials of 512 (issue 41's stage-1 Winograd pair): owed 0.5 x 0.1 x 512 = 25.6
    big = task(900.0, trials=495, history=[(463, 1000.0), (495, 900.0)])
    starved = task(100.0, trials=17, history=[(9, 100.0), (17, 100.0)])
    assert budget.next_task([big, starved], 32) == 1
    assert budget.starving([big, starved], [0, 1]) == 1
    # below STARVE_SHARE it is the share rule's to decide, and a task with its fair trials is not owed
    tiny = task(10.0, trials=1, history=[(0, 10.0), (1, 10.0)])
    assert budget.starving([big, tiny], [0, 1]) is None
    assert budget.starving([big, task(100.0, trials=40)], [0, 1]) is None
    assert budget.starving([big, task(100.0, trials=17, done=True)], [0]) is None   # a finished task is not live
