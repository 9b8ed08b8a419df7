"""Shim manifests: the valid shape, and a corpus of broken ones that must each fail in one line."""

from __future__ import annotations

import datetime
from pathlib import Path, PurePosixPath

import pytest
from packaging.version import Version

from shims.errors import InputError
from shims.manifest import discover, load_manifest, manifest_paths
from shims.model import CommitInTag, PrReleased, ReproducerClean, VersionFloor
from tests.support.shimtree import (
    manifest_text,
    run_python,
    subprocess_env,
    write_shim,
    write_target,
)


def test_a_valid_manifest_loads_into_values(tmp_path: Path):
    folder = write_shim(tmp_path, "toy_add")
    manifest = load_manifest(folder / "manifest.toml")
    assert manifest.id == "toy_add"
    assert manifest.fix_class == "source-patch"
    assert manifest.created == datetime.date(2026, 4, 14)
    assert manifest.target.distribution == "toylib" and manifest.target.module == "toylib"
    assert (
        Version("1.0") in manifest.target.affected
        and Version("1.1") not in manifest.target.affected
    )
    assert manifest.upstream.status == "submitted"
    assert [link.role for link in manifest.upstream.links] == ["report", "fix"]
    assert manifest.retirement.mode == "any"
    kinds = [condition.kind for condition in manifest.retirement.conditions]
    assert kinds == ["version-floor", "pr-released", "commit-in-tag", "reproducer-clean"]
    # one type per kind, each with exactly its fields: a closed union the engine matches on
    types = [type(condition) for condition in manifest.retirement.conditions]
    assert types == [VersionFloor, PrReleased, CommitInTag, ReproducerClean]
    floor = manifest.retirement.conditions[0]
    assert isinstance(floor, VersionFloor)
    # defaults to the target's distribution
    assert floor.distribution == "toylib"
    assert Version("1.1") in floor.version
    assert manifest.reproducer.path == PurePosixPath("reproduce.py")
    assert manifest.reproducer.timeout == 60.0
    assert manifest.reproducer_path == folder / "reproduce.py"
    assert manifest.has_patch and manifest.patch_path == folder / "patch.py"
    assert manifest.env == ()


def test_defaults_and_env_constraint(tmp_path: Path):
    text = manifest_text("toy_env", fix_class="env-constraint")
    # no mode, no [reproducer] table
    text = text.replace('mode = "any"\n', "").split("[reproducer]")[0]
    text += '[env]\nTL_DISABLE_TMA_LOWER = "1"\n'
    folder = write_shim(tmp_path, "toy_env", manifest=text, patch=None)
    manifest = load_manifest(folder / "manifest.toml")
    assert manifest.retirement.mode == "all"
    assert manifest.reproducer.timeout == 600.0 and not manifest.reproducer.needs_cuda
    assert manifest.env_vars == {"TL_DISABLE_TMA_LOWER": "1"}
    assert not manifest.has_patch


def test_discover_sorts_by_id_and_honours_the_root_argument(tmp_path: Path):
    for shim_id in ("zeta", "alpha", "mid"):
        write_shim(tmp_path, shim_id)
    (tmp_path / "not_a_shim").mkdir()
    assert [m.id for m in discover(tmp_path)] == ["alpha", "mid", "zeta"]
    assert len(manifest_paths(tmp_path)) == 3


def test_discover_reads_patchlane_shims_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    first, second = tmp_path / "one", tmp_path / "two"
    write_shim(first, "from_one")
    write_shim(second, "from_two")
    monkeypatch.setenv("PATCHLANE_SHIMS_PATH", f"{first}:{second}")
    assert [m.id for m in discover()] == ["from_one", "from_two"]


def _swap(old: str, new: str):
    def mutate(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return mutate


def _drop_conditions(text: str) -> str:
    head, _, rest = text.partition("[[retirement.conditions]]")
    return head + "[reproducer]" + rest.partition("[reproducer]")[2]


BAD = {
    "missing retirement condition": (
        _drop_conditions,
        "retirement.conditions: no retirement condition",
    ),
    "unknown fix class": (
        _swap('fix-class = "source-patch"', 'fix-class = "monkey-patch"'),
        "fix-class: unknown fix class 'monkey-patch' — use one of source-patch, wrapper",
    ),
    "bad affected specifier": (
        _swap('affected = ">=1.0,<1.1"', 'affected = "1.0 or newer"'),
        "target.affected: bad version specifier '1.0 or newer'",
    ),
    "bad floor specifier": (
        _swap('version = ">=1.1"', 'version = "=>1.1"'),
        "retirement.conditions[0].version: bad version specifier '=>1.1'",
    ),
    "link not a URL": (
        _swap('url = "https://example.org/toylib/issues/1"', 'url = "toylib#1"'),
        "upstream.links[0].url: not an http(s) URL: 'toylib#1'",
    ),
    "ftp link": (
        _swap('url = "https://example.org/toylib/pull/2"', 'url = "ftp://example.org/pull/2"'),
        "upstream.links[1].url: not an http(s) URL",
    ),
    "reproducer path escapes": (
        _swap('path = "reproduce.py"', 'path = "../other/reproduce.py"'),
        "reproducer.path: '../other/reproduce.py' leaves the shim folder",
    ),
    "reproducer path absolute": (
        _swap('path = "reproduce.py"', 'path = "/etc/passwd"'),
        "reproducer.path: '/etc/passwd' leaves the shim folder",
    ),
    "unknown top-level key": (
        _swap("owner = ", 'ownr = "x"\nowner = '),
        "ownr: unknown key 'ownr' — did you mean 'owner'?",
    ),
    "unknown nested key": (
        _swap("needs-cuda = false", "needs-gpu = false"),
        "reproducer.needs-gpu: unknown key",
    ),
    "unknown condition kind": (
        _swap('kind = "reproducer-clean"', 'kind = "x"'),
        (
            "retirement.conditions[3].kind: unknown kind 'x' — use one of version-floor, "
            "pr-released, commit-in-tag, reproducer-clean"
        ),
    ),
    "id does not match folder": (
        _swap('id = "toy_add"', 'id = "toy_other"'),
        "id: id 'toy_other' does not match its folder",
    ),
    "created not a date": (
        _swap("created = 2026-04-14", 'created = "yesterday"'),
        "created: expected a date",
    ),
    "bad upstream status": (
        _swap('status = "submitted"', 'status = "merged"'),
        "upstream.status: unknown status 'merged'",
    ),
    "bad commit": (
        _swap('commit = "0123456789abcdef0123456789abcdef01234567"', 'commit = "main"'),
        "retirement.conditions[2].commit: not a commit sha",
    ),
    "bad capability": (
        _swap("needs-cuda = false", 'needs-cuda = true\nmin-compute-capability = "sm90"'),
        "reproducer.min-compute-capability: expected major.minor",
    ),
    "env outside env-constraint": (
        lambda text: text + '\n[env]\nX = "1"\n',
        "env: only env-constraint shims",
    ),
    "invalid toml": (_swap("[target]", "[target"), "invalid TOML"),
    "timeout not positive": (
        _swap("timeout = 60", "timeout = 0"),
        "reproducer.timeout: expected a positive number",
    ),
    "build a shell line": (
        _swap('module = "toylib"', 'module = "toylib"\nbuild = "make wheel"'),
        "target.build: expected an argument list, got a string",
    ),
    "build empty": (
        _swap('module = "toylib"', 'module = "toylib"\nbuild = []'),
        "target.build: is empty",
    ),
    "build climbs out": (
        _swap('module = "toylib"', 'module = "toylib"\nbuild = ["bash", "{here}/../x.sh"]'),
        "target.build[1]: '{here}/../x.sh' leaves the folder of the file that names the build",
    ),
    "build placeholder mid-argument": (
        _swap('module = "toylib"', 'module = "toylib"\nbuild = ["bash", "x{here}/b.sh"]'),
        "target.build[1]: {here} may only start an argument",
    ),
    "build unknown key": (
        _swap('module = "toylib"', 'module = "toylib"\nbuild = { command = ["make"], env = [] }'),
        "target.build.env: unknown key",
    ),
    "build timeout": (
        _swap(
            'module = "toylib"', 'module = "toylib"\nbuild = { command = ["make"], timeout = -1 }'
        ),
        "target.build.timeout: expected a positive number of seconds",
    ),
}


def test_a_named_build_is_an_argument_list_with_here_made_the_shim_folder(tmp_path: Path):
    text = manifest_text("toy_add").replace(
        'module = "toylib"', 'module = "toylib"\nbuild = ["bash", "{here}/build-wheel.sh", "-j4"]'
    )
    folder = write_shim(tmp_path, "toy_add", manifest=text)
    build = load_manifest(folder / "manifest.toml").target.build
    assert build is not None and build.timeout == 3600
    assert build.argv() == ["bash", str(folder / "build-wheel.sh"), "-j4"]
    assert "manifest.toml [target] build" in build.describe()
    table = manifest_text("toy_add").replace(
        'module = "toylib"', 'module = "toylib"\nbuild = { command = ["make"], timeout = 60 }'
    )
    folder = write_shim(tmp_path / "t", "toy_add", manifest=table)
    build = load_manifest(folder / "manifest.toml").target.build
    assert build is not None and (build.command, build.timeout) == (("make",), 60)
    assert (
        load_manifest(write_shim(tmp_path / "n", "toy_add") / "manifest.toml").target.build is None
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_manifests_fail_in_one_line(tmp_path: Path, case: str):
    mutate, expected = BAD[case]
    folder = write_shim(tmp_path, "toy_add", manifest=mutate(manifest_text("toy_add")))
    with pytest.raises(InputError) as caught:
        load_manifest(folder / "manifest.toml")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(folder / "manifest.toml") + ": ")
    assert " — " in message
    assert expected in message


def test_missing_files_are_named(tmp_path: Path):
    folder = write_shim(tmp_path, "toy_add", reproducer=None)
    with pytest.raises(InputError, match=r"reproducer.path: file not found: reproduce.py"):
        load_manifest(folder / "manifest.toml")
    folder = write_shim(tmp_path, "toy_nopatch", patch=None)
    with pytest.raises(InputError, match=r"fix-class: source-patch shims need a patch.py"):
        load_manifest(folder / "manifest.toml")
    # The runtime only needs the manifest itself.
    assert load_manifest(folder / "manifest.toml", check_files=False).has_patch is False


def test_submitted_needs_a_link(tmp_path: Path):
    text = manifest_text("toy_add")
    text = text.split("[[upstream.links]]")[0] + "[retirement]" + text.split("[retirement]")[1]
    folder = write_shim(tmp_path, "toy_add", manifest=text)
    with pytest.raises(InputError, match=r"upstream.links: status 'submitted' needs a link"):
        load_manifest(folder / "manifest.toml")


@pytest.mark.slow
def test_the_cli_reports_a_bad_manifest_without_a_traceback(tmp_path: Path):
    root, site = tmp_path / "shims", tmp_path / "site"
    write_target(site)
    write_shim(
        root,
        "toy_add",
        manifest=manifest_text("toy_add").replace('path = "reproduce.py"', 'path = "../x.py"'),
    )
    result = run_python("", subprocess_env(tmp_path, root, site), args=["-m", "shims", "--check"])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert (
        "reproducer.path: '../x.py' leaves the shim folder — use a path inside it" in result.stderr
    )


def test_reserved_ids_are_the_runtimes_own_modules(tmp_path: Path):
    import shims
    from shims.manifest import RESERVED_IDS

    package = Path(shims.__file__).parent
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    # derived from the package, so a new runtime module is reserved at once
    assert modules <= RESERVED_IDS
    assert {"manifest", "reproducer", "shape", "errors", "tomlreader"} <= RESERVED_IDS
    # no real shim is reserved
    assert not RESERVED_IDS & {m.id for m in discover(package)}
    for shim_id in ("shape", "tomlreader"):
        folder = write_shim(tmp_path, shim_id)
        with pytest.raises(InputError) as caught:
            load_manifest(folder / "manifest.toml")
        assert (
            f"id: shim id {shim_id!r} is reserved by the runtime (shims/{shim_id}.py) — pick "
            f"another id" in str(caught.value)
        )


def test_odd_values_are_one_line_errors(tmp_path: Path):
    text = manifest_text("toy_add").replace("timeout = 60", "timeout = nan")
    folder = write_shim(tmp_path, "toy_add", manifest=text)
    with pytest.raises(
        InputError,
        match=r"reproducer.timeout: expected a positive number of seconds up to 10000000, got a "
        r"number nan",
    ):
        load_manifest(folder / "manifest.toml")
    # no timer takes it
    (folder / "manifest.toml").write_text(text.replace("timeout = nan", "timeout = 1e300"))
    with pytest.raises(
        InputError,
        match=r"reproducer.timeout: expected a positive number of seconds up to 10000000",
    ):
        load_manifest(folder / "manifest.toml")
    text = manifest_text("toy_add").replace(
        'url = "https://example.org/toylib/issues/1"', 'url = "https://["'
    )
    (folder / "manifest.toml").write_text(text)
    with pytest.raises(
        InputError, match=r"upstream.links\[0\].url: not an http\(s\) URL: 'https://\['"
    ):
        load_manifest(folder / "manifest.toml")
