"""Run at the start of TVM's builder and runner pool workers the product starts (their ``PYTHONPATH``
names this folder and the package's root, ``spawn.isolated_env``): no PyTorch in them (``no_torch``);
they build and time kernels only."""
from asight_lsp.engine.startup import no_torch

no_torch.install()
