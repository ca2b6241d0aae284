"""What a task must be before MetaSchedule tunes it (TVM side): static input shapes, and buffers that fit
in memory (every trial allocates them).  One ``ValueError`` with what to do; the job reports it as the
input's problem (exit 1)."""
from __future__ import annotations

import os

from .compat import tvm


def require_static_inputs(func) -> None:
    """A model with a symbolic input dimension cannot be tuned (MetaSchedule tunes static shapes;
    TVM stops on an internal check): say which input and what to do."""
    for param in getattr(func, "params", []) or []:
        info = getattr(param, "ty", None) or getattr(param, "struct_info", None)
        name = getattr(param, "name", None) or getattr(param, "name_hint", "?")
        shape = getattr(info, "shape", None)
        values = getattr(shape, "values", None)
        if values is not None and not all(isinstance(v, tvm.tirx.IntImm) for v in values):
            dims = ", ".join(str(int(v)) if isinstance(v, tvm.tirx.IntImm) else str(v) for v in values)
            raise ValueError(f"input '{name}' has a symbolic shape ({dims}); tuning needs static shapes: "
                             f"re-import with --shape {name}=<sizes> (e.g. 1,3,224,224), or write the sizes in the "
                             f"function's signature")


def require_fits_memory(task) -> None:
    """Every trial allocates the task's buffers: a task whose buffers outgrow the machine's memory is
    refused up front, naming the largest (2**62 elements ended in XGBoost's "value too large")."""
    func = task.mod["main"]
    sizes = []
    for param in getattr(func, "params", []):
        try:
            elements = 1
            for dim in param.shape:
                elements *= int(dim)
            sizes.append((elements * tvm.runtime.DataType(str(param.dtype)).bits // 8, param.name, elements))
        except (TypeError, AttributeError, ValueError):
            return     # a symbolic shape: said elsewhere
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if sizes and sum(size for size, _, _ in sizes) > memory:
        size, name, elements = max(sizes, key=lambda item: item[0])   # the first of the largest
        raise ValueError(f"task '{task.name}': buffer '{name}' holds {elements:,} elements ({size / 2**30:,.0f} GiB); "
                         f"its buffers need more than this machine's {memory / 2**30:.0f} GiB, and every trial "
                         "allocates them")
