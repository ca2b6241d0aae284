"""The layout of MetaSchedule's ``PerStoreFeature`` vector (164 floats per written buffer).

Read from upstream ``per_store_feature.cc`` and checked against rows extracted on this box
(docs/analytics.md): every count is stored as ``slog(x) = sign(x) * log2(|x| + 1)``.

* group 1 (57): 16 arithmetic op counts, then vectorize / unroll / parallel (11 each:
  ``num, prod, len`` + 8 one-hot positions), then ``is_gpu`` and 7 GPU thread extents;
* group 2 (90): 5 buffers x 18 access features (read/write/readwrite one-hot, bytes,
  unique_bytes, lines, unique_lines, 3 reuse-type one-hot, reuse distance (iters, bytes), reuse
  count, 4 "per reuse" ratios, stride);
* group 3 (10): arithmetic-intensity curve; group 4 (4): allocation; group 5 (3): outer product,
  number of loops, auto-unroll max step.
"""
from __future__ import annotations

import numpy as np

LENGTH = 164
ARITH = ["float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp", "float_math_func",
         "float_other_func", "int_mad", "int_add_sub", "int_mul", "int_div_mod", "int_cmp", "int_math_func",
         "int_other_func", "bool_op", "select_op"]
POSITIONS = ["none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce", "middle_reduce",
             "outer_reduce", "mixed"]
BUFFER_FIELDS = ["read", "write", "readwrite", "bytes", "unique_bytes", "lines", "unique_lines",
                 "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
                 "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
                 "unique_lines_d_reuse_ct", "stride"]
N_BUFFERS = 5


def _names() -> list[str]:
    names = list(ARITH)
    for kind in ("vec", "unroll", "parallel"):
        names += [f"{kind}_num", f"{kind}_prod", f"{kind}_len"] + [f"{kind}_pos_{p}" for p in POSITIONS]
    names += ["is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len", "threadIdx_x_len",
              "threadIdx_y_len", "threadIdx_z_len", "vthread_len"]
    for b in range(N_BUFFERS):
        names += [f"buf{b}_{f}" for f in BUFFER_FIELDS]
    names += [f"intensity_{i}" for i in range(10)]
    names += ["alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod"]
    names += ["outer_prod", "num_loops", "auto_unroll_max_step"]
    return names


NAMES = _names()
INDEX = {name: i for i, name in enumerate(NAMES)}
assert len(NAMES) == LENGTH
FLOAT_OPS = [INDEX[n] for n in ("float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp",
                                "float_math_func")]
BUFFER_LINES = [INDEX[f"buf{b}_lines"] for b in range(N_BUFFERS)]
BUFFER_BYTES = [INDEX[f"buf{b}_bytes"] for b in range(N_BUFFERS)]


def unslog(values: np.ndarray) -> np.ndarray:
    """Inverse of ``slog``: the raw counts back from the stored features."""
    values = np.asarray(values, dtype=np.float64)
    return np.sign(values) * (np.exp2(np.abs(values)) - 1.0)
