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
  schedule that is fastest with them cached can be 2x slower in the model (``cold_remeasure``);
* ``winograd``: a channels-last 3x3 convolution of stride 1 on a constant weight, large enough to pay
  for its transforms, computed as Winograd F(4x4, 3x3) (``winograd_fits``): 36 multiplications per
  output tile and channel pair where the direct form does 144, the weight transformed once at build time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

LEVERS = ("twins", "budget", "default", "layout", "nhwc", "cold", "winograd")
LEVERS_OFF_ENV = "ASIGHT_LEVERS_OFF"
PIPELINE = ("layout", "nhwc", "winograd")   # levers that change the kernels: a run's records are for its own
BEFORE_KNOWN = ("layout", "nhwc")   # the pipeline levers of a run made before run.json recorded them
#                                     (store/record.Levers: ``extra.levers_off``, ``extra.pipeline_levers``)
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


def run_levers_off(recorded: list | None, now_off: set[str], workloads_text: str | None,
                   known: list | None = None) -> set[str]:
    """The levers a job on a run works without: the pipeline levers (``PIPELINE``) as the run was made
    (its records are for those kernels: an export with other layouts finds no record), the others as
    now.  A pipeline lever that did not exist when the run was made (not in ``known``, its run.json's
    ``Levers.known``; ``BEFORE_KNOWN`` without one) was off.  A run made before the record existed had no
    channels-last conversion, and packed weights only if its workloads carry ``layout_free_buffers``."""
    if recorded is not None:
        pipeline = set(recorded) & set(PIPELINE)
    else:
        pipeline = {"nhwc"} | (set() if workloads_text and "layout_free_buffers" in workloads_text else {"layout"})
    pipeline |= set(PIPELINE) - set(BEFORE_KNOWN if known is None else known)
    return (set(now_off) - set(PIPELINE)) | pipeline


WINOGRAD_TILE = 4                # F(4x4, 3x3): a 6x6 input tile per 4x4 output tile
WINOGRAD_MIN_MACS = 20_000_000   # not measured: small convolutions (the test models') keep the direct form


def winograd(target_kind: str, off: set[str]) -> bool:
    """Whether a build for a target of this kind computes the convolutions that fit (``winograd_fits``)
    as Winograd: on CPUs, after the channels-last conversion (the form it rewrites)."""
    return channels_last(target_kind, off) is not None and "winograd" not in off


def winograd_fits(conv: dict) -> bool:
    """Whether one 2-D convolution is computed as Winograd F(4x4, 3x3): channels-last (NHWC data, OHWI
    weight, NHWC out) float32, a 3x3 kernel, stride 1, no dilation, one group, and at least
    ``WINOGRAD_MIN_MACS`` multiply-adds in the direct form (ResNet-18's 3x3 convolutions of stride 1
    have 116 M each; a test model's 8-channel 8x8 one 37 k).  ``conv``: ``layouts`` (data, kernel,
    out), ``dtype``, ``kernel`` (h, w), ``strides``, ``dilation``, ``groups``, ``out`` (N, H, W, C)
    and ``in_channels``."""
    if (tuple(conv["layouts"]) != ("NHWC", "OHWI", "NHWC") or conv["dtype"] != "float32"
            or tuple(conv["kernel"]) != (3, 3) or tuple(conv["strides"]) != (1, 1)
            or tuple(conv["dilation"]) != (1, 1) or conv["groups"] != 1):
        return False
    n, h, w, c = conv["out"]
    return n * h * w * c * conv["in_channels"] * 9 >= WINOGRAD_MIN_MACS


# --------------------------------------------------------------------------- a lever TVM refuses

REFUSED_KEY = "levers_refused"   # run.json ``extra``: each lever TVM refused, where, and why
STEPS = {
    "nhwc": "ConvertLayout to channels-last",
    "winograd": "the Winograd rewrite",
    "layout": "the weight prepack (layout-free weights)",
    "cold": "the cold re-measurement (inputs flushed from the caches before each call)",
    "budget": "the share scheduler",
}
WHAT_TO_DO = {
    "nhwc": "that convolution keeps the model's layout",
    "winograd": "the convolutions keep the direct form",
    "layout": "the weights keep their layout",
    "cold": "its candidates were re-measured warm",
    "budget": "MetaSchedule's own task scheduler took the batches",
}


@dataclass(frozen=True)
class Refusal:
    """A lever TVM refused on one kernel or binding (``kernel``) or on the whole model (``kernel``
    None), at one step of the pipeline, with TVM's reason in one line; the run went on without it there."""
    lever: str
    step: str
    reason: str
    kernel: str | None = None

    def as_dict(self) -> dict:
        return {"lever": self.lever, "step": self.step, "reason": self.reason, "kernel": self.kernel}

    @staticmethod
    def of(data: dict) -> "Refusal":
        return Refusal(str(data.get("lever")), str(data.get("step")), str(data.get("reason")), data.get("kernel"))


def reason_line(err: BaseException) -> str:
    """TVM's reason in one line: the last line of its message (where TVM puts the check that failed),
    without the check's C++ condition: ``InternalError: Invalid SLayout:can't find S in source layoutABCDE``."""
    lines = [x.strip() for x in str(err).strip().splitlines() if x.strip()]
    text = re.sub(r"^Check failed: \(.*?\) is false: ", "", lines[-1]) if lines else type(err).__name__
    return f"{type(err).__name__}: {text[:240]}"


def refusal_line(r: Refusal) -> str:
    """One line a user reads: the lever, the kernel, the step, TVM's reason, what happened instead."""
    where = f"on {r.kernel}" if r.kernel else "on the whole model"
    instead = WHAT_TO_DO.get(r.lever, "it ran without the lever there")
    return (f"lever {r.lever} skipped {where}: TVM refused {r.step} ({r.reason}); {instead} and the run "
            f"went on ({LEVERS_OFF_ENV}={r.lever} skips it everywhere)")


def refusal_lines(extra: dict | None, reply: dict | None = None) -> list[str]:
    """The refusal lines of a run (its run.json ``extra``) and of a worker's reply, in order."""
    return [refusal_line(Refusal.of(r)) for r in refusals_of(extra, reply) if isinstance(r, dict)]


def refusals_of(extra: dict | None, reply: dict | None = None) -> list[dict]:
    """A run's refusals (its run.json ``extra``) and a worker reply's own (``levers_refused``), each once."""
    return merge_refusals((extra or {}).get(REFUSED_KEY), list((reply or {}).get(REFUSED_KEY) or []))


def merge_refusals(earlier: list | None, new: list[dict]) -> list[dict]:
    """``earlier`` (run.json's) with ``new`` added, each (lever, kernel, step) once."""
    out, seen = [], set()
    for r in list(earlier or []) + list(new):
        key = (r.get("lever"), r.get("kernel"), r.get("step"))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def accepted_subset(items: list, refuses: Callable[[list], str | None]) -> tuple[list, dict]:
    """The items a lever may apply to together, and why each other item was refused.

    ``refuses(subset)`` tries the lever on ``subset`` and returns TVM's reason, or None when it took it.
    Greedy in the given order, a refused chunk split in halves: each kept chunk was tried with every
    item kept before it, so the lever on the items returned was tried exactly as returned (the last
    acceptance saw them all).  A single item refused with what was kept is refused, with that reason.
    ``refuses([])`` is never asked."""
    kept: list = []
    reasons: dict = {}
    chunks = [list(items)] if items else []
    while chunks:
        chunk = chunks.pop(0)
        reason = refuses(kept + chunk)
        if reason is None:
            kept += chunk
        elif len(chunk) == 1:
            reasons[chunk[0]] = reason
        else:
            half = len(chunk) // 2
            chunks[:0] = [chunk[:half], chunk[half:]]
    return kept, reasons
