"""Where a test run's time went, from pytest's JUnit XML (each case's time includes its setup, so a
session fixture's work is counted in the first test that asked for it).

    python scripts/test_times.py test-artifacts/pytest.xml [--durations OUT] [--top N] [--extra LAYER=SECONDS ...]

Prints the wall time of each layer (tests/<layer>/), slowest first, and writes the N slowest tests
to OUT (default test-artifacts/durations.txt).  ``--extra`` adds layers timed outside this XML (the
TVM-blocked unit run, the extension's npm test)."""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def cases(path: str) -> list[tuple[str, float]]:
    """(``tests/layer/file.py::name``, seconds) of every test case in the XML."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        out.append((f"{module}.py::{case.get('name')}", float(case.get("time") or 0.0)))
    return out


def layer_of(test: str) -> str:
    parts = test.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xml")
    ap.add_argument("--durations", default="test-artifacts/durations.txt")
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--extra", action="append", default=[], metavar="LAYER=SECONDS")
    args = ap.parse_args(argv)
    try:
        found = cases(args.xml)
    except (OSError, ET.ParseError) as err:
        print(f"test_times: no test times ({err})", file=sys.stderr)
        found = []
    layers: dict[str, list[float]] = defaultdict(list)
    for test, seconds in found:
        layers[layer_of(test)].append(seconds)
    for item in args.extra:
        name, _, seconds = item.partition("=")
        layers[name].append(float(seconds))
    print("test time by layer (wall seconds; a case's time includes its fixtures' setup):")
    for name, times in sorted(layers.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:<22} {sum(times):8.1f} s  ({len(times)} tests)" if name in {layer_of(t) for t, _ in found}
              else f"  {name:<22} {sum(times):8.1f} s")
    print(f"  {'total':<22} {sum(map(sum, layers.values())):8.1f} s")
    slowest = sorted(found, key=lambda c: -c[1])[:args.top]
    with open(args.durations, "w") as fh:
        fh.write(f"# the {len(slowest)} slowest of {len(found)} tests (seconds, setup included)\n")
        fh.writelines(f"{seconds:8.2f}  {test}\n" for test, seconds in slowest)
    print(f"the {len(slowest)} slowest tests: {args.durations}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
