"""The harness's cold timer (issue 21's ``cold`` lever): each call timed alone after TVM's cache flush of
every argument but the first, the repeat's figure their mean; the warm timer times k calls together."""
from types import SimpleNamespace

import pytest

from asight_lsp.worker.harness import COLD, COLD_CALLS, evaluator_timer


class Recorder:
    def __init__(self, results):
        self.calls, self.results = [], results

    def __call__(self, name, device, **kw):
        self.calls.append((name, kw))
        return lambda *args: SimpleNamespace(results=list(self.results))


def test_cold_calls_are_timed_one_by_one_after_a_flush():
    rec = Recorder([3e-6, 5e-6, 4e-6])
    repeat = evaluator_timer(rec, "main", "cpu", [1, 2], cold=True)(3)
    assert repeat() == pytest.approx(4e-6)
    assert rec.calls == [("main", {"number": 1, "repeat": 3, "min_repeat_ms": 0, "f_preproc": COLD})]
    assert COLD == "cache_flush_cpu_non_first_arg"


def test_a_small_kernel_is_not_flushed_thousands_of_times_a_repeat():
    rec = Recorder([1e-6])
    evaluator_timer(rec, "main", "cpu", [1], cold=True)(20000)()     # 20 ms of 1 µs calls, warm
    assert rec.calls[0][1]["repeat"] == COLD_CALLS == 20


def test_warm_calls_are_timed_together():
    rec = Recorder([2e-6])
    assert evaluator_timer(rec, "main", "cpu", [1])(50)() == pytest.approx(2e-6)
    assert rec.calls == [("main", {"number": 50, "repeat": 1, "min_repeat_ms": 0})]
