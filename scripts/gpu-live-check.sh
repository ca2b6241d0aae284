#!/usr/bin/env bash
# The prepared live GPU check of issue 20 (docs/gpu.md, "Running the live checks"): one device call
# (or two back to back when the wheels are split, scripts/gpu-live-prepare.sh). It
#   0. collects the carried wheels (.whl1/, .whl2/) in /tmp/asight-whl; until every wheel of
#      .whl1/MANIFEST is whole it stops there (exit 0) and says what is missing;
#   1. installs them into /tmp/site and puts /tmp/site on the device Python's path with a .pth
#      (product processes start `python -I`: PYTHONPATH would not reach them);
#   2. records the environment (GPU, nvcc, ncu, TVM's CUDA runtime, PyTorch)            ~20 s
#   3. runs the gpu-marked tests and the nvcc-backed PTX test                           <= 180 s
#   4. runs bench/gpu.py live: matmul1024 and the ResNet conv, 12 trials each, tuned vs
#      DLight vs cuBLAS/cuDNN, counters by the tuning job (20 s each); raw tune_tir     <= 340 s
# Everything lands in $OUT (the device tool's output folder; else bench/results/gpu-live): env.txt,
# pytest-gpu.txt, bench.txt, gpu.json. About 9 minutes in all: run it with timeout_s=560.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results/gpu-live}
mkdir -p "$OUT" /tmp/asight-whl
PY=${ASIGHT_PYTHON:-python3}
export PYTHONUNBUFFERED=1

cp -f .whl1/* .whl2/* /tmp/asight-whl/ 2>/dev/null || true
manifest=/tmp/asight-whl/MANIFEST
if [ -f "$manifest" ]; then
  missing=0
  while read -r name sum; do
    w=/tmp/asight-whl/$name
    if [ ! -f "$w" ] && [ -f "$w.part-1" ] && [ -f "$w.part-2" ]; then cat "$w.part-1" "$w.part-2" > "$w"; fi
    if [ ! -f "$w" ] || [ "$(sha256sum "$w" | cut -d' ' -f1)" != "$sum" ]; then rm -f "$w"; echo "missing: $name"; missing=1; fi
  done < "$manifest"
  if [ "$missing" = 1 ]; then echo "wheels incomplete: carry .whl2 in the next call (within 30 s)" | tee "$OUT/env.txt"; exit 0; fi
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/asight-whl/*.whl \
    || { echo "pip install of the carried wheels failed" | tee "$OUT/env.txt"; exit 2; }
  echo /tmp/site > "$($PY -c 'import site; print(site.getsitepackages()[0])')/zz_asight_site.pth"
fi
# TVM's CUDA runtime needs libcudart.so.13 (fixtures/gpu/README.md)
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/lib64; do [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; done

{
  date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  echo "nvcc: $(command -v nvcc || echo none)   ncu: $(command -v ncu || echo none)"
  $PY -c "import tvm; print('tvm', tvm.__version__, 'cuda device:', tvm.cuda(0).exist)"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda:', torch.cuda.is_available())"
} 2>&1 | tee "$OUT/env.txt"
$PY -c "import tvm, asight_lsp" 2>/dev/null || PYTHONPATH=$PWD $PY -c "import tvm" \
  || { echo "no TVM for $PY: carry the wheels (scripts/gpu-live-prepare.sh)" | tee -a "$OUT/env.txt"; exit 2; }
# the parsing worker's OS sandbox (libseccomp, landlock; docs/sandbox.md) must come up there, or it refuses
PYTHONPATH=$PWD timeout 60 $PY -m asight_lsp check fixtures/matmul64.py 2>&1 | tee -a "$OUT/env.txt"

PYTHONPATH=$PWD timeout 180 $PY -m pytest -q -rs -p no:cacheprovider \
  tests/worker/test_gpu_baseline.py "tests/worker/test_adopt_gpu.py::test_ptx_with_nvcc_is_linked_through_the_cuda_lines_to_the_tir" \
  2>&1 | tee "$OUT/pytest-gpu.txt"

PYTHONPATH=$PWD timeout 340 $PY bench/gpu.py --trials 12 --counters-budget 20 --timeout 110 2>&1 | tee "$OUT/bench.txt"
cp -f bench/results/gpu.json "$OUT/gpu.json" 2>/dev/null || true
date -u | tee -a "$OUT/env.txt"
