"""``asight library``: the schedule library every tuning run feeds (docs/tuning.md "Schedule library")."""
from __future__ import annotations


from .common import print_json


def add_parser(sub):
    p = sub.add_parser("library", help="the schedule library every run feeds and starts from: list, prune, "
                                       "export, import")
    p.add_argument("action", choices=("list", "prune", "export", "import"), nargs="?", default="list")
    p.add_argument("file", nargs="?", help="export: the file to write; import: the library file to read")
    p.add_argument("--target", help="the library's target (its key, or a part of its text) where it holds several")
    p.add_argument("--keep", type=int, default=0, help="prune: keep the N workloads fed last (default 0: empty it)")
    p.add_argument("--python", help="import: interpreter of the sandboxed worker that checks the records")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def run(args) -> int:
    from ..errors import AsightError
    from ..services import library
    if args.action in ("export", "import") and not args.file:
        raise AsightError(f"asight library {args.action} needs a FILE")
    if args.action == "list":
        result = library.listing()
    elif args.action == "prune":
        result = library.prune(args.target, args.keep)
    elif args.action == "export":
        result = library.export(args.file, args.target)
    else:
        result = library.import_file(args.file, args.python)
    if args.json:
        print_json(result)
    else:
        print(render(args.action, result))
    return 1 if result.get("refused") else 0


def render(action: str, result: dict) -> str:
    if action == "list":
        return _listing(result)
    if action == "prune":
        return f"{result['target']}: kept {result['kept']} of {result['before']} workloads"
    if action == "export":
        return f"wrote {result['workloads']} workloads of {result['target']} to {result['file']}"
    kept = f", {result['not_faster']} not added (the library's own were as fast)" if result["not_faster"] else ""
    lines = [f"{result['target']}: {result['added']} workloads added{kept}"]
    lines += [f"refused {r['task']}: its record does not replay on its workload ({r['why']})" for r in result["refused"]]
    return "\n".join(lines)


def _listing(result: dict) -> str:
    if result["folder"] is None:
        return f"the schedule library is off ({result['off']})"
    if result.get("problem"):
        return f"the schedule library: {result['problem']}"
    if not result["targets"]:
        return f"the schedule library ({result['folder']}) is empty: every `asight tune` adds its best schedules"
    lines = [f"schedule library: {result['folder']}"]
    for t in result["targets"]:
        lines.append(f"{t['key']}  {t['target']}  ({t['workloads']} workloads)")
        if t.get("problem"):
            lines.append(f"    ⚠ not valid, left out of every run (the next run's feed sets it aside): {t['problem']}")
        for e in t["entries"][:20]:
            best = f"{e['best_us']:.3g} µs" if e["best_us"] is not None else "no valid time"
            lines.append(f"    {e['task']}  {best}")
        if len(t["entries"]) > 20:
            lines.append(f"    … and {len(t['entries']) - 20} more")
    return "\n".join(lines)
