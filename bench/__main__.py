"""``python -m bench [--only NAME]… [--quick] [--output PATH]``: run the benchmark modules, print
one table (benchmark, measured, goal, PASS / MISS / SKIP / ERROR), write the rows as JSON.

Exit status: 0 even when a goal is missed (the table says MISS: these machines are noisy, a miss is
a number to look at, not a broken build); 1 only when a benchmark module itself crashed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pkgutil
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

import bench
from bench import QUICK_ENV, ROW_KEYS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".patchlane" / "bench" / "latest.json"


def discover() -> list[str]:
    """Benchmark module names in the ``bench`` package, sorted; ``_``-prefixed ones are helpers."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(bench.__path__)
        if not info.name.startswith("_") and not info.ispkg
    )


def _error_row(module: str, message: str) -> dict:
    return {
        "name": f"{module}",
        "value": math.nan,
        "goal": "-",
        "unit": "",
        "ok": False,
        "detail": message,
        "module": module,
        "error": True,
    }


def _checked(module: str, result: object) -> list[dict]:
    """The module's rows, each with its module; a row that breaks the convention is an error row."""
    if not isinstance(result, list):
        return [
            _error_row(module, f"run() returned {type(result).__name__}, expected a list of rows")
        ]
    rows = []
    for number, item in enumerate(result):
        missing = [key for key in ROW_KEYS if not isinstance(item, dict) or key not in item]
        if missing:
            rows.append(_error_row(module, f"row {number} lacks {', '.join(missing)}"))
            continue
        try:
            value = float(item["value"])
        except (TypeError, ValueError):
            rows.append(
                _error_row(module, f"row {item['name']!r}: value {item['value']!r} is not a number")
            )
            continue
        rows.append({**item, "value": value, "ok": bool(item["ok"]), "module": module})
    return rows


def run_module(module: str) -> tuple[list[dict], float]:
    """Import ``bench.<module>`` and call its ``run()``; never raises (a crash becomes one row)."""
    started = time.perf_counter()
    try:
        loaded = importlib.import_module(f"bench.{module}")
        runner = getattr(loaded, "run", None)
        if not callable(runner):
            rows = [_error_row(module, "module defines no run()")]
        else:
            rows = _checked(module, runner())
    # one broken benchmark must not hide the others' numbers
    except Exception as exc:  # noqa: BLE001
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        rows = [_error_row(module, f"{type(exc).__name__}: {exc} ({where})".replace("\n", " "))]
        rows[0]["traceback"] = traceback.format_exc()
    return rows, time.perf_counter() - started


def verdict(item: dict) -> str:
    if item.get("error"):
        return "ERROR"
    if math.isnan(item["value"]):
        return "SKIP"
    return "PASS" if item["ok"] else "MISS"


def format_value(value: float, unit: str) -> str:
    if math.isnan(value):
        return "—"
    if unit == "x":
        return f"{value:.2f}×" if value < 100 else f"{value:.0f}×"
    if unit == "%":
        return f"{value:.2f} %"
    return f"{value:.3g} {unit}".rstrip()


def table(rows: list[dict]) -> str:
    header = ("benchmark", "measured", "goal", "result")
    lines = [(r["name"], format_value(r["value"], r["unit"]), r["goal"], verdict(r)) for r in rows]
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(4)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()

    out = [fmt(header), fmt(tuple("-" * w for w in widths))]
    out += [fmt(cells) for cells in lines]
    out.append("")
    out += [f"{r['name']}: {r['detail']}" for r in rows if r["detail"]]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this benchmark module (repeatable), e.g. --only shims",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewest repetitions (smoke test; numbers are rough)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"JSON results (default: {DEFAULT_OUTPUT.relative_to(ROOT)})",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmark modules and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from retire.core.atomic import atomic_write
    from retire.core.project import boundary

    args = parse_args(argv)
    available = discover()
    if args.list:
        print("\n".join(available))
        return 0
    wanted = args.only or available
    unknown = [name for name in wanted if name not in available]
    if unknown:
        print(
            f"python -m bench: error: unknown benchmark {unknown[0]!r} (known: "
            f"{', '.join(available)})",
            file=sys.stderr,
        )
        return 2
    if args.quick:
        os.environ[QUICK_ENV] = "1"
    started = datetime.now(UTC)
    rows: list[dict] = []
    durations: dict[str, float] = {}
    for name in wanted:
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        module_rows, seconds = run_module(name)
        durations[name] = round(seconds, 3)
        rows += module_rows
        for item in module_rows:
            if item.get("traceback"):
                print(item["traceback"], file=sys.stderr, flush=True)
    print(table(rows), flush=True)
    missed = [r["name"] for r in rows if verdict(r) == "MISS"]
    if missed:
        print(f"\nMISS: {len(missed)} goal(s) not met here: {', '.join(missed)}", flush=True)
    report = {
        "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": args.quick,
        "host": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "node": platform.node(),
        },
        "module_seconds": durations,
        # JSON has no NaN: a row that was not measured has value null.
        "rows": [
            {**r, "value": None if math.isnan(r["value"]) else r["value"], "result": verdict(r)}
            for r in rows
        ],
    }
    output = Path(args.output).absolute()
    # inside the repository, never through a link on the way (.patchlane/bench by default)
    atomic_write(output, json.dumps(report, indent=2) + "\n", within=boundary(ROOT, output.parent))
    print(f"results: {args.output}", flush=True)
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
