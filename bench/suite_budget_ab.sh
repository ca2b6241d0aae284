#!/bin/bash
# A/B of the harness budgets the suite sets (tests/conftest.py): each file run with the product's defaults
# (A: 1.5 s and 0.6 s, set explicitly, which conftest's setdefault keeps) and with the suite's (B: 0.3 s and
# 0.15 s), the order alternating per file; prints arm, file, rc, wall seconds, pytest's summary.
cd "$(dirname "$0")/.."
files="tests/worker/test_tune.py tests/worker/test_tune_relax.py tests/models/test_export_deployable.py tests/worker/test_layout_lever.py tests/worker/test_lever_refused.py"
i=0
for f in $files; do
  for arm in $( [ $((i%2)) -eq 0 ] && echo "A B" || echo "B A" ); do
    if [ $arm = B ]; then export ASIGHT_MEASURE_BUDGET_S=0.3 ASIGHT_CANDIDATE_BUDGET_S=0.15; else export ASIGHT_MEASURE_BUDGET_S=1.5 ASIGHT_CANDIDATE_BUDGET_S=0.6; fi
    s=$(date +%s.%N)
    timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider $f > ${OUT:-/tmp}/ab-$arm-$(basename $f).log 2>&1; rc=$?
    e=$(date +%s.%N)
    echo "$arm $f rc=$rc $(echo "$e - $s" | bc) $(tail -1 ${OUT:-/tmp}/ab-$arm-$(basename $f).log)"
  done
  i=$((i+1))
done
