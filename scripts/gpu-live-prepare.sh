#!/usr/bin/env bash
# Run HERE (a machine with pip and the registry), once, before a session's device lease (docs/gpu.md,
# "Running the live checks"). The device image ('cuda': Python 3.12, PyTorch, nvcc, ncu) has no TVM
# and none of ASight's own packages, and nothing can be fetched there: this downloads them as cp312
# manylinux wheels and lays them out for at most two `run` calls of at most 64 MiB each:
#   .whl1/ and .whl2/ (in .gitignore), each <= 56 MiB (the working tree travels too); a wheel too large for
#   one call is split into parts; .whl1/MANIFEST names every wheel with its sha256.
# Not run in the session that wrote it (no device was lent; nothing was downloaded).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .whl1 .whl2 && mkdir -p .whl-all .whl1 .whl2   # .whl-all kept: pip skips wheels it has
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# ASight's needs that the image lacks (the image has numpy, scipy, scikit-learn, networkx, msgpack,
# matplotlib, onnx, psutil, cloudpickle, attrs, typing-extensions: docs/gpu.md)
PKGS=(apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost-cpu tornado pygls lsprotocol cattrs pyseccomp)
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLAT[@]}" \
  -d .whl-all "${PKGS[@]}"
: > .whl1/MANIFEST
room=(0 $((56 * 1024 * 1024)) $((56 * 1024 * 1024)))   # + the working tree (~4 MiB) <= 64 MiB a call
for w in $(ls -S .whl-all/*.whl); do
  name=$(basename "$w"); size=$(stat -c %s "$w")
  echo "$name $(sha256sum "$w" | cut -d' ' -f1)" >> .whl1/MANIFEST
  if [ "$size" -le "${room[1]}" ]; then cp "$w" .whl1/; room[1]=$((room[1] - size))
  elif [ "$size" -le "${room[2]}" ]; then cp "$w" .whl2/; room[2]=$((room[2] - size))
  else                                  # split across the two calls
    head -c "${room[1]}" "$w" > ".whl1/$name.part-1"
    tail -c +"$((room[1] + 1))" "$w" > ".whl2/$name.part-2"
    room[2]=$((room[2] - size + room[1])); room[1]=0
  fi
done
du -sh .whl1 .whl2
[ "${room[2]}" -ge 0 ] || { echo "the wheels do not fit two calls of 64 MiB: see docs/gpu.md" >&2; exit 2; }
echo "next: run(command='bash scripts/gpu-live-check.sh', carry=['.whl1']), then at once (within the machine's"
echo "30 s warm window) run(command='bash scripts/gpu-live-check.sh', carry=['.whl2'], timeout_s=560)"
