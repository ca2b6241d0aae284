"""Print the names of asight_lsp/protocol.py as JSON (for the TypeScript mirror test).

Loads the module by path (it is standard-library only), so no install of the package is needed:
    python3 scripts/dump-protocol.py [PATH_TO_protocol.py]
Constants: every UPPER_CASE module attribute (sets become sorted lists); typedDicts: the keys of
every TypedDict class.
"""
import importlib.util
import json
import sys
from pathlib import Path

path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "asight_lsp" / "protocol.py"
spec = importlib.util.spec_from_file_location("asight_protocol_mirror", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)

constants, typed = {}, {}
for name, value in vars(mod).items():
    if name.isupper() and isinstance(value, (str, int, float, list, tuple, set, frozenset, dict)):
        constants[name] = sorted(value) if isinstance(value, (set, frozenset)) else value
    elif isinstance(value, type) and issubclass(value, dict) and hasattr(value, "__total__"):
        typed[name] = list(value.__annotations__)
print(json.dumps({"constants": constants, "typedDicts": typed}, indent=1))
