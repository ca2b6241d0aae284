"""The GPU headline (analysis/gpu_headline.py) with the H100 figures of the issue (recorded, not live)."""
from __future__ import annotations

from asight_lsp.analysis.gpu_headline import headline

DLIGHT = {"kind": "dlight", "label": "DLight's default schedule"}


def test_conv_tuned_beats_dlight_and_cudnn():
    record = {"untuned": {"median_us": 25.0}, "tuned": {"median_us": 14.8}, "verdict": "faster",
              "speedup": {"estimate": 1.69, "ci": [1.62, 1.75]}, "baseline": DLIGHT,
              "vendor": {"label": "cuDNN (PyTorch)", "median_us": 27.1}}
    out = headline(record)
    assert out["kept"] == "tuned"
    assert out["lines"][0] == ("tuned 14.8 µs vs DLight's default schedule 25.0 µs: 1.69× — faster than DLight's "
                               "default schedule (95 % CI 1.62×–1.75×)")
    assert out["lines"][1] == "cuDNN (PyTorch) 27.1 µs: the run's result runs at 1.83× the vendor library's speed"


def test_matmul_against_cublas_says_how_far_behind_it_is():
    record = {"untuned": {"median_us": 160.0}, "tuned": {"median_us": 134.6}, "verdict": "faster",
              "speedup": {"estimate": 1.19, "ci": [1.1, 1.3]}, "baseline": DLIGHT,
              "vendor": {"label": "cuBLAS (PyTorch)", "median_us": 57.4}}
    assert headline(record)["lines"][1].endswith("runs at 0.43× the vendor library's speed")


def test_when_tuning_loses_the_run_keeps_the_baseline():
    record = {"untuned": {"median_us": 25.0}, "tuned": {"median_us": 50.0}, "verdict": "slower",
              "speedup": {"estimate": 0.5, "ci": [0.45, 0.55]}, "baseline": DLIGHT,
              "vendor": {"note": "PyTorch with CUDA is not installed"}}
    out = headline(record)
    assert out["kept"] == "baseline"
    assert "SLOWER than DLight's default schedule" in out["lines"][0]
    assert out["lines"][1] == "vendor library: PyTorch with CUDA is not installed"
    assert out["lines"][-1].startswith("DLight's default kept: tuned 50.0 µs vs DLight 25.0 µs (tuning lost to "
                                       "DLight's default schedule: the run keeps it as its result")
    assert headline({}) is None


def test_the_lens_words_name_dlight_as_the_baseline_of_a_gpu_record():
    from asight_lsp.analysis.measurement import short_speedup
    record = {"speedup": {"estimate": 1.69, "ci": [1.62, 1.75]}, "verdict": "faster", "baseline": DLIGHT}
    assert short_speedup(record) == "1.69× vs DLight"
    assert short_speedup({**record, "baseline": None}) == "1.69× vs untuned"
    assert short_speedup({**record, "verdict": "slower", "speedup": {"estimate": 0.5}}) == "2.0× slower than DLight"
