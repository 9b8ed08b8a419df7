"""Where a shop's shim catalogue is: found by path or by declared configuration, never by being
part of the installed ``shims`` package (standard library only).

The roots, first match wins:

1. ``$PATCHLANE_SHIMS_PATH`` — folders holding ``<id>/manifest.toml`` (``os.pathsep``-separated):
   what launchers, lane runs and a training image set;
2. the project's ``patchlane.toml`` — ``[catalogue] path = "shims"`` (the default when the file has
   no such key), relative to the file and inside the project. Without an explicit project, the
   nearest ``patchlane.toml`` from the current folder upwards names it;
3. nothing: no shims (the runtime never falls back to a catalogue of its own).

A catalogue folder is plain data plus Python files: it needs no ``__init__.py``, and a shop's
``shims/`` folder without one cannot shadow the installed runtime (a regular package found later
on ``sys.path`` beats a folder without ``__init__.py``). Its shims import as ``shims.<id>``.
"""

import os

from shims.filereading import read_bytes

# Annotations only: shims.errors is imported on the error path (activation stays a few stat calls).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from shims.errors import InputError

__all__ = ["CONFIG_NAME", "DEFAULT_PATH", "PATH_ENV", "configured", "find_project", "roots"]

PATH_ENV = "PATCHLANE_SHIMS_PATH"
#: The project settings file that declares the catalogue.
CONFIG_NAME = "patchlane.toml"
#: ``[catalogue] path`` when the project does not say.
DEFAULT_PATH = "shims"


def find_project(start: str | os.PathLike[str] | None = None) -> str | None:
    """The nearest folder from ``start`` (default: the current folder) upwards with a
    ``patchlane.toml``."""
    folder = os.path.abspath(os.fspath(start) if start is not None else os.getcwd())
    while True:
        if os.path.isfile(os.path.join(folder, CONFIG_NAME)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def configured(project: str | os.PathLike[str]) -> str:
    """The catalogue folder of the project at ``project`` (absolute; it need not exist yet).

    Raises :class:`~shims.errors.InputError` (one line) for a ``patchlane.toml`` that is not TOML, a
    ``[catalogue]`` that is not a table, an unknown key, or a path that is absolute or leaves the
    project.
    """
    project = os.path.abspath(os.fspath(project))
    config = os.path.join(project, CONFIG_NAME)
    shown = os.path.join(os.path.basename(project) or project, CONFIG_NAME)
    # never a block: a FIFO or a folder there is one line
    raw = read_bytes(config, shown, missing_ok=True)
    if raw is None:
        return os.path.join(project, DEFAULT_PATH)
    # no section: no TOML parser imported
    if b"catalogue" not in raw:
        return os.path.join(project, DEFAULT_PATH)
    section = _plain_section(raw)
    # anything but the plain form: the real parser (tomllib costs ~4 ms to import)
    if section is None:
        import tomllib

        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise _input_error(shown, None, f"not valid TOML ({exc})", "fix the syntax") from None
        section = data.get("catalogue", {})
    if not isinstance(section, dict):
        raise _input_error(
            shown, "catalogue", "expected a table", 'write [catalogue] with path = "shims"'
        )
    unknown = sorted(set(section) - {"path"})
    if unknown:
        raise _input_error(
            shown,
            f"catalogue.{unknown[0]}",
            "unknown key",
            'the only key is path, e.g. path = "shims"',
        )
    path = section.get("path", DEFAULT_PATH)
    if not isinstance(path, str) or not path.strip():
        raise _input_error(
            shown, "catalogue.path", f"expected a folder name, got {path!r}", 'write path = "shims"'
        )
    folder = os.path.normpath(os.path.join(project, path))
    if os.path.isabs(path) or os.path.commonpath([project, folder]) != project:
        raise _input_error(
            shown,
            "catalogue.path",
            f"{path!r} leaves the project",
            'use a folder inside the project such as "shims"; elsewhere, set PATCHLANE_SHIMS_PATH',
        )
    return folder


def _input_error(path: str, key: str | None, problem: str, fix: str) -> "InputError":
    """The one input-error type, imported only when there is an error to raise."""
    from shims.errors import InputError

    return InputError(path, key, problem, fix)


def _plain_section(raw: bytes) -> dict[str, str] | None:
    """``{"path": …}`` when the catalogue is written in the plain form — a ``[catalogue]`` line,
    then ``path = "…"`` (comments and blank lines around) — else ``None``: parse the file for
    real."""
    path = None
    inside = False
    for line in raw.split(b"\n"):
        text = line.split(b"#", 1)[0].strip()
        if not text:
            continue
        if text.startswith(b"["):
            if inside:
                break
            inside = text == b"[catalogue]"
        elif inside:
            key, _, value = text.partition(b"=")
            value = value.strip()
            if (
                path is not None
                or key.strip() != b"path"
                or len(value) < 2
                or value[:1] != b'"'
                or value[-1:] != b'"'
                or b'"' in value[1:-1]
                or b"\\" in value
            ):
                return None
            path = value[1:-1]
        # a dotted key or an inline table: not the plain form
        elif b"catalogue" in text:
            return None
    try:
        return {"path": path.decode("utf-8")} if path is not None else None
    except UnicodeDecodeError:
        return None


def roots(project: str | os.PathLike[str] | None = None) -> list[str]:
    """The catalogue roots: ``project``'s when given, else ``$PATCHLANE_SHIMS_PATH``, else the
    nearest project's."""
    if project is not None:
        return [configured(project)]
    from_env = [os.path.abspath(p) for p in os.environ.get(PATH_ENV, "").split(os.pathsep) if p]
    if from_env:
        return from_env
    found = find_project()
    return [configured(found)] if found is not None else []
