"""Which model-tuning levers are on (issue 21; docs/models.md "Levers"): every lever is on unless
``ASIGHT_LEVERS_OFF`` (a comma list) names it, for ``bench/model_levers.py``'s ablation.

* ``twins``: a twin's or sibling's best schedule replayed onto a task (``worker/twins.py``);
* ``budget``: the share scheduler (``analysis/budget.py``);
* ``default``: the default schedule as a candidate in the re-measurement (``default_candidate.py``);
* ``layout``: the weight prepack (``prepacks``): weights marked layout-free, so a CPU schedule stores
  them in the layout its loops read, packed once at build time;
* ``nhwc``: the model's 2-D convolutions converted to channels-last (NHWC activations, OHWI weights;
  Relax ``ConvertLayout``) before tuning, on CPUs (``channels_last``);
* ``cold``: the re-measurement that picks each model task's record times its candidates cold, every
  input but the first flushed from the CPU caches before each call, and more of them (``remeasure``):
  in a model a kernel's weights were evicted by the other kernels' since its last call, and a
  schedule that is fastest with them cached can be 2x slower in the model (``cold_remeasure``).
"""
from __future__ import annotations

LEVERS = ("twins", "budget", "default", "layout", "nhwc", "cold")
LEVERS_OFF_ENV = "ASIGHT_LEVERS_OFF"
PIPELINE = ("layout", "nhwc")   # levers that change the kernels themselves: a run's records are for its own
RECORD_KEY = "levers_off"       # run.json ``extra``: the levers off when the run was made
PREPACK_KINDS = ("llvm", "c")   # CPU targets; a GPU schedule keeps the weights' layout (DLight fallback)


def levers_off(value: str | None) -> set[str]:
    """The levers an ``ASIGHT_LEVERS_OFF`` value switches off; an unknown name is an error (a typo
    would otherwise run an ablation with every lever on)."""
    names = {x.strip() for x in (value or "").split(",") if x.strip()}
    unknown = names - set(LEVERS)
    if unknown:
        raise ValueError(f"{LEVERS_OFF_ENV}: unknown lever(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(LEVERS)}")
    return names


def prepacks(target_kind: str, off: set[str]) -> bool:
    """Whether a build for a target of this kind packs weights into the tuned schedules' layouts."""
    return target_kind in PREPACK_KINDS and "layout" not in off


COLD_TOP_K = 8     # candidates a cold re-measurement times per task (warm: remeasure.TOP_K)


def cold_remeasure(target_kind: str, off: set[str]) -> bool:
    """Whether a model's tasks are re-measured cold (their inputs but the first flushed from the cache
    before each call; TVM's ``cache_flush_cpu_non_first_arg``, a CPU function) on a target of this kind."""
    return target_kind in PREPACK_KINDS and "cold" not in off


CHANNELS_LAST = {"relax.nn.conv2d": ["NHWC", "OHWI"]}


def channels_last(target_kind: str, off: set[str]) -> dict | None:
    """The ``ConvertLayout`` layouts a build for a target of this kind converts the model's
    convolutions to before tuning (channels-last on CPUs: a convolution's output channels, contiguous,
    fill the vector lanes where a 7x7 or 14x14 NCHW row cannot), or None to keep the model's layout."""
    return dict(CHANNELS_LAST) if target_kind in PREPACK_KINDS and "nhwc" not in off else None


def run_levers_off(recorded: list | None, now_off: set[str], workloads_text: str | None) -> set[str]:
    """The levers a job on a run works without: the pipeline levers (``PIPELINE``) as the run was made
    (its records are for those kernels: an export with other layouts finds no record), the others as
    now.  A run made before the record existed had no channels-last conversion, and packed weights
    only if its workloads carry ``layout_free_buffers``."""
    if recorded is not None:
        pipeline = set(recorded) & set(PIPELINE)
    else:
        pipeline = {"nhwc"} | (set() if workloads_text and "layout_free_buffers" in workloads_text else {"layout"})
    return (set(now_off) - set(PIPELINE)) | pipeline
