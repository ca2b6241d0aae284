"""A Relax MLP of three identical layers (matmul + bias + relu, 256 wide): repeated kernels."""
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((8, 256), "float32"),
             w1: R.Tensor((256, 256), "float32"), b1: R.Tensor((256,), "float32"),
             w2: R.Tensor((256, 256), "float32"), b2: R.Tensor((256,), "float32"),
             w3: R.Tensor((256, 256), "float32"), b3: R.Tensor((256,), "float32")) -> R.Tensor((8, 256), "float32"):
        with R.dataflow():
            h1 = R.matmul(x, w1)
            a1 = R.add(h1, b1)
            r1 = R.nn.relu(a1)
            h2 = R.matmul(r1, w2)
            a2 = R.add(h2, b2)
            r2 = R.nn.relu(a2)
            h3 = R.matmul(r2, w3)
            a3 = R.add(h3, b3)
            out = R.nn.relu(a3)
            R.output(out)
        return out
