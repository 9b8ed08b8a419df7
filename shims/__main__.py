"""``python -m shims``: every shim, whether it is active in this process, and why.

python -m shims            a table (activates the shims in this process first)
python -m shims --json     the same rows as JSON
python -m shims --probe    also import each installed target, so probes and shape checks run
python -m shims --check    validate every manifest strictly (CI); exit 2 on the first errors
python -m shims --root DIR the catalogue of the project at DIR (its patchlane.toml), not the one
                           found from $PATCHLANE_SHIMS_PATH or the current folder upwards
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings
from importlib import metadata

import shims
from shims.errors import InputError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shims", description="List patchlane shims and their state."
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="import each installed target module so its shape check and probe run",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate every manifest and its files; exit 2 on errors",
    )
    parser.add_argument(
        "--root", help="project folder whose catalogue to use (its patchlane.toml [catalogue] path)"
    )
    args = parser.parse_args(argv)
    from shims import catalogue
    from shims.errors import InputError

    try:
        # this process (and only it) uses that project's catalogue
        if args.root is not None:
            os.environ[catalogue.PATH_ENV] = catalogue.configured(args.root)
        if args.check:
            code = check(as_json=args.json)
            # --json: the rows follow a clean check, as `patchlane shim list --check --json`
            if code or not args.json:
                return code
    except InputError as exc:
        print(f"shims: error: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps(_error_document(exc), indent=2))
        return 2
    found = rows(probe=args.probe)
    print(json.dumps(found, indent=2) if args.json else table(found))
    return 0


def rows(*, probe: bool = False) -> list[dict[str, object]]:
    """Activate the shims in this process (importing installed targets with ``probe``); one row
    each."""
    # a listing says "no shims found" itself: the runtime's warning would say it twice
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", shims.CatalogueNotFoundWarning)
        shims.activate()
    if probe:
        for state in shims.status().values():
            if state.state != "pending-import":
                continue
            try:
                importlib.import_module(state.target)
            except ModuleNotFoundError:
                # not installed here: the shim stays pending-import, which is the truth
                pass
            # the target itself is broken here: say so, keep listing
            except Exception as exc:  # noqa: BLE001
                print(
                    f"shims: cannot import {state.target}: {type(exc).__name__}: {exc}",
                    file=sys.stderr,
                )
    found = []
    for state in shims.status().values():
        row: dict[str, object] = {
            "id": state.id,
            "fix_class": state.fix_class,
            "target": state.target,
            "distribution": state.distribution,
            "installed": _installed(state.distribution),
            "state": state.state,
            "reason": state.reason,
        }
        if state.state == "pending-import" and state.distribution and row["installed"] is None:
            # waiting for an import that cannot happen here: not "pending" — not installed
            row["state"] = NOT_INSTALLED
            row["reason"] = (
                f"{state.distribution} is not installed here: nothing to patch (it applies where "
                f"{state.target} is imported)"
            )
        found.append(row)
    return found


#: A row's state when the shim's distribution is not installed in this interpreter (the runtime
#: would wait for an import that cannot happen).
NOT_INSTALLED = "not-installed"
#: A guard's row (``patchlane shim list``): a retired shim, never activated; its standing is in
#: the row's ``guard``.
GUARD = "guard"
#: Every state a listing's row can have: the runtime's, and the two above.
LISTING_STATES = (*shims.STATES, NOT_INSTALLED, GUARD)


def check(root: str | None = None, *, as_json: bool = False) -> int:
    """Validate every manifest under ``root`` (default: the configured shim roots); 2 on errors.
    ``as_json``: stdout is left to one JSON document (the last error's, on errors)."""
    errors, checked = problems(root)
    for error in errors:
        print(f"shims: error: {error}", file=sys.stderr)
    if errors:
        if as_json:
            print(json.dumps(_error_document(errors[-1]), indent=2))
        return 2
    print(f"{checked} shim manifest(s) OK", file=sys.stderr if as_json else sys.stdout)
    return 0


def _error_document(error: InputError) -> dict[str, object]:
    """The error document of ``patchlane … --json`` (retire/schemas/error.schema.json)."""
    return {
        "ok": False,
        "exit_code": 2,
        "error": {
            "kind": "bad-input",
            "file": error.path,
            "key": error.key,
            "message": error.problem,
            "fix": error.fix,
        },
    }


def problems(root: str | None = None) -> tuple[list[InputError], int]:
    """Every problem of the catalogue under ``root`` (one :class:`InputError` each), and how many
    manifests were checked."""
    from shims.manifest import RUNTIME_DIR, load_manifest, manifest_paths, shim_roots

    errors: list[InputError] = []
    for base in shim_roots(root):
        # A catalogue with __init__.py is a package named like its folder: from the shop's root,
        # `import shims` would find it instead of the runtime (this repository's is the runtime).
        if (base / "__init__.py").is_file() and base.resolve() != RUNTIME_DIR:
            errors.append(
                InputError(
                    base / "__init__.py",
                    None,
                    "the catalogue is a package and shadows the installed `shims` runtime",
                    "delete it (a catalogue is a plain folder)",
                )
            )
    paths = manifest_paths(root)
    for path in paths:
        try:
            load_manifest(path)
        except InputError as exc:
            errors.append(exc)
    return errors, len(paths)


def _installed(distribution: str) -> str | None:
    if not distribution:
        return None
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def table(found: list[dict[str, object]]) -> str:
    header = ("shim", "fix class", "target", "installed", "state", "why")
    body = [
        (
            str(row["id"]),
            str(row["fix_class"] or "?"),
            str(row["target"] or "?"),
            # a guard has no patch: nothing of it is installed or not
            str(row["installed"] or ("—" if row.get("guard") else "not installed")),
            f"guard: {row['guard']}" if row.get("guard") else str(row["state"]),
            str(row["reason"]),
        )
        for row in found
    ]
    if not body:
        return (
            "no shims found (the catalogue: $PATCHLANE_SHIMS_PATH, else [catalogue] path of the "
            "nearest patchlane.toml, default shims/)"
        )
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header) - 1)]
    lines = []
    for line in [header, *body]:
        # every cell but the last is padded (it has no width: nothing follows it)
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        lines.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
