"""LayerNorm over 128 rows of 768: two reductions (sum, sum of squares) then a normalize block."""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def layernorm(A: T.Buffer((128, 768), "float32"), gamma: T.Buffer((768,), "float32"),
              beta: T.Buffer((768,), "float32"), Out: T.Buffer((128, 768), "float32")):
    T.func_attr({"global_symbol": "layernorm", "tir.noalias": True})
    total = T.alloc_buffer((128,), "float32")
    sqsum = T.alloc_buffer((128,), "float32")
    for i, k in T.grid(128, 768):
        with T.sblock("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                total[vi] = T.float32(0)
            total[vi] = total[vi] + A[vi, vk]
    for i, k in T.grid(128, 768):
        with T.sblock("sqsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                sqsum[vi] = T.float32(0)
            sqsum[vi] = sqsum[vi] + A[vi, vk] * A[vi, vk]
    for i, j in T.grid(128, 768):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = (A[vi, vj] - total[vi] / T.float32(768)) * T.rsqrt(
                sqsum[vi] / T.float32(768) - total[vi] / T.float32(768) * (total[vi] / T.float32(768))
                + T.float32(1e-5)) * gamma[vj] + beta[vj]
