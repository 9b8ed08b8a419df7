"""Lane and matrix files: the model they produce, and one-line errors for every kind of bad
input."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from retire.core.errors import InputError
from retire.lanes import lanefile
from tests.conftest import run_cli, subprocess_env

GOOD = """
[lane]
python = "3.12"
requirements = ["torchlike==2.1.0"]
"""


def write(root, name, text):
    (root / "lanes").mkdir(exist_ok=True)
    path = root / "lanes" / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_lane_file_becomes_an_immutable_lane(tmp_path):
    write(
        tmp_path,
        "stable",
        """
        # comment survives nothing here: reading only
        [lane]
        description = "the stack"
        python = "3.12"
        platform = "aarch64-manylinux_2_28"
        requirements = ["torchlike==2.1.0", "helper>=1"]
        constraints = ["helper<3"]
        exclude-newer = 2026-11-01
        shims = ["a_shim", "a_shim", "b_shim"]
        needs-cuda = true
        [lane.env]
        TL_DISABLE_TMA_LOWER = "1"
        [lane.indexes.nightly]
        url = "http://127.0.0.1:9/simple"
        [lane.sources]
        TorchLike = "nightly"
        [[lane.static-metadata]]
        name = "cudaext"
        version = "1.0.0"
        requires-dist = ["helper"]
    """,
    )
    [lane] = lanefile.load_lanes(tmp_path / "lanes", root=tmp_path)
    assert lane.name == "stable"
    assert lane.platform == "aarch64-manylinux_2_28"
    assert lane.exclude_newer == datetime(2026, 11, 1, tzinfo=UTC)
    # de-duplicated, order kept
    assert lane.shims == ("a_shim", "b_shim")
    # names are normalised
    assert lane.sources_dict == {"torchlike": "nightly"}
    assert lane.env_dict == {"TL_DISABLE_TMA_LOWER": "1"}
    assert lane.static_metadata[0].requires_dist == ("helper",)
    assert lane.needs_cuda is True
    with pytest.raises(AttributeError):
        # frozen
        lane.python = "3.13"


def test_digest_changes_with_lock_inputs_only(tmp_path):
    write(tmp_path, "a", GOOD)
    [before] = lanefile.load_lanes(tmp_path / "lanes")
    write(tmp_path, "a", GOOD + 'shims = ["x_y"]\ndescription = "words"\n[lane.env]\nA = "1"\n')
    [cosmetic] = lanefile.load_lanes(tmp_path / "lanes")
    # env, shims, prose do not change what is locked
    assert cosmetic.digest == before.digest
    write(tmp_path, "a", GOOD.replace("2.1.0", "2.2.0"))
    [changed] = lanefile.load_lanes(tmp_path / "lanes")
    assert changed.digest != before.digest


MATRIX = """
[matrix]
name = "t{torch}-h{helper}"
[matrix.base]
python = "3.12"
requirements = ["kernels"]
[matrix.axes.torch."2.1"]
requirements = ["torchlike==2.1.0"]
[matrix.axes.torch.nightly]
requirements = ["torchlike>=2.3.0.dev0"]
prerelease = "allow"
[matrix.axes.helper."1"]
requirements = ["helper==1.5"]
[matrix.axes.helper."2"]
requirements = ["helper==2.0"]
[[matrix.exclude]]
torch = "nightly"
[[matrix.include]]
torch = "nightly"
helper = "2"
lane = { description = "the one nightly cell we ship" }
"""


def test_matrix_expands_with_exclude_include_and_deterministic_names(tmp_path):
    write(tmp_path, "compat", MATRIX)
    lanes = lanefile.load_lanes(tmp_path / "lanes", root=tmp_path)
    assert [lane.name for lane in lanes] == ["t2.1-h1", "t2.1-h2", "tnightly-h2"]
    nightly = lanes[-1]
    assert nightly.requirements == ("kernels", "torchlike>=2.3.0.dev0", "helper==2.0")
    assert nightly.prerelease == "allow"
    assert nightly.description == "the one nightly cell we ship"
    assert nightly.origin == "lanes/compat.toml [torch=nightly, helper=2]"
    # Same input, same output: expansion is deterministic.
    again = lanefile.load_lanes(tmp_path / "lanes")
    assert [lane.digest for lane in again] == [lane.digest for lane in lanes]


def test_default_matrix_names_use_file_stem(tmp_path):
    write(tmp_path, "grid", MATRIX.replace('name = "t{torch}-h{helper}"\n', ""))
    names = [lane.name for lane in lanefile.load_lanes(tmp_path / "lanes")]
    assert names == ["grid-2.1-1", "grid-2.1-2", "grid-nightly-2"]


def test_select_rejects_unknown_lane(tmp_path):
    write(tmp_path, "a", GOOD)
    lanes = lanefile.load_lanes(tmp_path / "lanes")
    assert [lane.name for lane in lanefile.select(lanes, ["a"])] == ["a"]
    with pytest.raises(InputError, match=r"unknown lane 'zz'.*known lanes: a"):
        lanefile.select(lanes, ["zz"])


# (file name, file text, text the key part must contain)
BAD_INPUT = [
    ("unknown-key", '[lane]\npythn = "3.12"\nrequirements = []\n', "lane.pythn: unknown key"),
    ("wrong-type", "[lane]\npython = 3.12\nrequirements = []\n", "lane.python: expected a string"),
    (
        "bad-policy",
        '[lane]\npython = "3.12"\nrequirements = []\npolicy = "freeze"\n',
        "lane.policy: unknown lane policy 'freeze' — use one of follow, hold",
    ),
    (
        "bad-specifier",
        '[lane]\npython = "3.12"\nrequirements = ["torch=2.9"]\n',
        "lane.requirements[0]: invalid requirement",
    ),
    (
        "bad-specifier-static",
        (
            '[lane]\npython = "3.12"\nrequirements = []\n[[lane.static-metadata]]\nname = '
            '"x"\nversion '
            '= "1"\nrequires-dist = ["y>>1"]\n'
        ),
        "lane.static-metadata[0].requires-dist[0]: invalid requirement",
    ),
    (
        "climbing-name",
        (
            '[matrix]\nname = "../{a}"\n[matrix.base]\npython = "3.12"\nrequirements = '
            "[]\n[matrix.axes.a.x]\n"
        ),
        "invalid lane name '../x'",
    ),
    (
        "dupes",
        (
            '[matrix]\nname = "same"\n[matrix.base]\npython = "3.12"\nrequirements = '
            "[]\n[matrix.axes.a.x]\n[matrix.axes.a.y]\n"
        ),
        "duplicate lane name 'same'",
    ),
    (
        "exclude-axis",
        (
            '[matrix]\n[matrix.base]\npython = "3.12"\nrequirements = '
            '[]\n[matrix.axes.a.x]\n[[matrix.exclude]]\nb = "x"\n'
        ),
        "matrix.exclude[0].b: names unknown axis 'b'",
    ),
    (
        "exclude-value",
        (
            '[matrix]\n[matrix.base]\npython = "3.12"\nrequirements = '
            '[]\n[matrix.axes.a.x]\n[[matrix.exclude]]\na = "q"\n'
        ),
        "matrix.exclude[0].a: unknown value 'q'",
    ),
    (
        "include-partial",
        (
            '[matrix]\n[matrix.base]\npython = "3.12"\nrequirements = '
            '[]\n[matrix.axes.a.x]\n[matrix.axes.b.y]\n[[matrix.include]]\na = "x"\n'
        ),
        "matrix.include[0]: an include must name every axis",
    ),
    (
        "conflicting-pins",
        '[lane]\npython = "3.12"\nrequirements = ["torch==2.9.1", "Torch==2.10.0"]\n',
        "lane.requirements[1]: conflicting pins for torch",
    ),
    (
        "conflicting-axes",
        (
            "[matrix]\n[matrix.base]\nrequirements = []\n[matrix.axes.a.x]\npython = "
            '"3.12"\n[matrix.axes.b.y]\npython = "3.13"\n'
        ),
        "matrix.axes.b.y.python: set to two values",
    ),
    (
        "unknown-index",
        '[lane]\npython = "3.12"\nrequirements = ["torch"]\n[lane.sources]\ntorch = "nightly"\n',
        "lane.sources.torch: unknown index name 'nightly'",
    ),
    (
        "bad-index-url",
        '[lane]\npython = "3.12"\nrequirements = []\n[lane.indexes.x]\nurl = "ftp:/nope"\n',
        "lane.indexes.x.url: not a URL",
    ),
    (
        "malformed-date",
        '[lane]\npython = "3.12"\nrequirements = []\nexclude-newer = "2026-13-45"\n',
        "lane.exclude-newer: malformed date",
    ),
    ("missing-python", "[lane]\nrequirements = []\n", "lane.python: missing"),
    (
        "bad-python",
        '[lane]\npython = "3"\nrequirements = []\n',
        "lane.python: invalid Python version",
    ),
    (
        "bad-platform",
        '[lane]\npython = "3.12"\nplatform = "amiga"\nrequirements = []\n',
        "lane.platform: unknown target platform",
    ),
    (
        "bad-env",
        '[lane]\npython = "3.12"\nrequirements = []\n[lane.env]\nlower = "1"\n',
        "lane.env.lower: invalid environment variable name",
    ),
    (
        "bad-prerelease",
        '[lane]\npython = "3.12"\nrequirements = []\nprerelease = "yes"\n',
        "lane.prerelease: unknown pre-release mode",
    ),
    (
        "two-tables",
        '[lane]\npython = "3.12"\nrequirements = []\n[matrix]\n',
        "holds exactly one [lane] or one [matrix]",
    ),
    ("not-toml", "[lane\npython=", "invalid TOML"),
    (
        "bad-template",
        (
            '[matrix]\nname = "{nope}"\n[matrix.base]\npython = "3.12"\nrequirements = '
            "[]\n[matrix.axes.a.x]\n"
        ),
        "matrix.name: placeholder {nope} names no axis",
    ),
]


@pytest.mark.parametrize("name,text,expected", BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_one_line_naming_file_key_and_fix(tmp_path, capsys, name, text, expected):
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / f"{name}.toml").write_text(text)
    code, out, err = run_cli(tmp_path, "lock", capsys=capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"patchlane: error: lanes/{name}.toml")
    assert expected in lines[0]
    # every error says what to do
    assert " — " in lines[0]
    assert "Traceback" not in err + out
    # nothing written
    assert not (tmp_path / "locks").exists()


def test_unknown_shim_is_rejected_when_the_project_has_shims(tmp_path, capsys):
    write(tmp_path, "a", GOOD + 'shims = ["no_such_shim"]\n')
    (tmp_path / "shims" / "real_shim").mkdir(parents=True)
    (tmp_path / "shims" / "real_shim" / "manifest.toml").write_text("")
    code, _, err = run_cli(tmp_path, "lanes", capsys=capsys)
    assert code == 2 and "a.shims: unknown shim 'no_such_shim'" in err


@pytest.mark.slow
def test_real_cli_process_prints_no_traceback(tmp_path):
    write(tmp_path, "x", "[lane]\npython = 3.12\nrequirements = []\n")
    proc = subprocess.run(
        [sys.executable, "-m", "retire", "--root", str(tmp_path), "lanes"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "patchlane: error: lanes/x.toml: lane.python: expected a string, got a number 3.12 "
        '— write it as a quoted version such as "3.12"'
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "pins",
    [
        # the same version, spelled twice
        ('"torch==2.11"', '"torch==2.11.0"'),
        # a wildcard is a range that holds the pin
        ('"torch==2.11.*"', '"torch==2.11.0"'),
    ],
)
def test_agreeing_pins_are_not_a_conflict(tmp_path, pins):
    write(
        tmp_path,
        "a",
        f'[lane]\npython = "3.12"\nrequirements = [{pins[0]}]\nconstraints = [{pins[1]}]\n',
    )
    assert lanefile.load_lanes(tmp_path / "lanes")[0].name == "a"


def test_a_matrix_description_reaches_its_cells(tmp_path):
    write(
        tmp_path,
        "m",
        '[matrix]\ndescription = "the grid"\n[matrix.base]\npython = "3.12"\nrequirements = []\n'
        '[matrix.axes.a.x]\n[matrix.axes.a.y]\ndescription = "the odd one"\n',
    )
    assert [(lane.name, lane.description) for lane in lanefile.load_lanes(tmp_path / "lanes")] == [
        ("m-x", "the grid"),
        ("m-y", "the odd one"),
    ]


def test_a_lane_follows_upstream_unless_it_holds_and_the_policy_is_no_lock_input(tmp_path):
    write(tmp_path, "follows", GOOD)
    write(tmp_path, "holds", GOOD.replace("[lane]\n", '[lane]\npolicy = "hold"\n'))
    write(
        tmp_path,
        "cells",
        """
        [matrix]
        name = "cell-{a}"
        [matrix.base]
        python = "3.12"
        requirements = ["torchlike==2.1.0"]
        policy = "hold"
        [matrix.axes.a.x]
        [matrix.axes.a.y]
        """,
    )
    lanes = {lane.name: lane for lane in lanefile.load_lanes(tmp_path / "lanes", root=tmp_path)}
    assert lanes["follows"].policy == "follow" and lanes["holds"].policy == "hold"
    assert {lanes["cell-x"].policy, lanes["cell-y"].policy} == {"hold"}
    # a policy edit never makes a lock stale: the lock's inputs leave it out
    assert lanes["follows"].digest == lanes["holds"].digest
