"""The tuning job's cost model (``worker/search.cost_model``): TVM's XGBoost model, trained only once
its predictions are used (it predicts at random below ``num_warmup_samples`` measured candidates)."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.tvm


def _features(n: int) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.random((2, 164)).astype("float32") for _ in range(n)], rng.random(n)


def test_no_booster_is_trained_below_the_warm_up_and_the_batch_that_reaches_it_trains_on_everything():
    from asight_lsp.worker.search import cost_model
    model = cost_model(1)
    xs, ys = _features(model.num_warmup_samples + 20)
    model.data_size, model.last_train_size = 60, 50          # as TVM's update leaves them before training
    model._train(xs[:60], ys[:60])
    assert model.booster is None and model.last_train_size == 0
    model.data_size = len(xs)
    model._train(xs, ys)
    assert model.booster is not None
    scores = model._predict(xs[:5])
    assert scores.shape == (5,) and np.isfinite(scores).all()
