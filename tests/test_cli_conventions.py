"""The command line as a new user meets it (issue 29, items 8 and 10): bare `patchlane` prints the
help, `--root`/`-q` work after nested sub-commands too, every option says what it is for, the
runtime-only install still prints its help, `python -m shims --json --check` keeps stdout one JSON
document, `shim new` warns about a target no lane installs, and `patchlane docs` has the README's
adoption section."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import jsonschema
import pytest

from retire.commands import ENGINE_MODULES, build_parser
from tests.conftest import ROOT, run_cli

FROM = ("--from", "patchlane[engine]==0.1.0")


def _python(*args, cwd, **env):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_bare_patchlane_prints_the_help(capsys):
    from retire.commands import main

    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("usage: patchlane") and "COMMAND" in out and err == ""


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_the_runtime_only_install_prints_its_help(tmp_path):
    # what `pip install patchlane` (no engine extra) has: none of the engine's modules
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in ENGINE_MODULES)
    )
    pythonpath = f"{tmp_path / 'site'}:{ROOT}"
    helped = _python("-m", "retire", "--help", cwd=tmp_path, PYTHONPATH=pythonpath)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: patchlane"), helped
    refused = _python("-m", "retire", "lanes", cwd=tmp_path, PYTHONPATH=pythonpath)
    assert refused.returncode == 1 and "the engine is not installed here" in refused.stderr


def test_root_and_quiet_are_taken_after_nested_sub_commands(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, err = run_cli(
        elsewhere, "pack", "check", "--root", str(tmp_path), "-q", "--json", capsys=capsys
    )
    assert code == 0, err
    assert json.loads(out)["ok"] is True
    code, _out, err = run_cli(
        elsewhere, "shim", "list", "-q", "--root", str(tmp_path), capsys=capsys
    )
    assert code == 0, err


def test_every_option_and_argument_says_what_it_is_for():
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, nested in action.choices.items():
                    walk(nested, f"{path} {name}")
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "patchlane")
    assert missing == []


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_python_m_shims_json_check_prints_one_json_document(tmp_path, capsys):
    assert run_cli(tmp_path, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    assert run_cli(tmp_path, "shim", "new", "my_fix", capsys=capsys)[0] == 0
    ran = _python("-m", "shims", "--json", "--check", "--root", str(tmp_path), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert [row["id"] for row in json.loads(ran.stdout)] == ["my_fix"]
    assert "1 shim manifest(s) OK" in ran.stderr
    manifest = tmp_path / "shims" / "my_fix" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('fix-class = "source-patch"', "fix-class = 3"))
    ran = _python("-m", "shims", "--json", "--check", "--root", str(tmp_path), cwd=tmp_path)
    assert ran.returncode == 2
    document = json.loads(ran.stdout)
    schema = json.loads((ROOT / "retire" / "schemas" / "error.schema.json").read_text())
    jsonschema.validate(document, schema)
    assert document["error"]["file"].endswith("manifest.toml")


def test_shim_new_warns_when_no_lane_installs_its_target(tmp_path, capsys):
    assert run_cli(tmp_path, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    code, out, err = run_cli(
        tmp_path, "shim", "new", "color_fix", "--distribution", "termcolor", capsys=capsys
    )
    assert code == 0, err
    warnings = [line for line in (out + err).splitlines() if line.startswith("warning:")]
    assert warnings == [
        (
            "warning: no lane installs termcolor: the shim's reproducer will skip (termcolor is "
            "not installed) until one does — add it to the requirements of lanes/cpu.toml"
        )
    ]
    code, out, err = run_cli(tmp_path, "shim", "new", "einops_fix", capsys=capsys)
    assert code == 0 and "warning:" not in out + err


def test_docs_has_the_readme_and_its_adoption_section(tmp_path, capsys):
    code, out, _err = run_cli(tmp_path, "docs", capsys=capsys)
    assert code == 0
    assert {line.split()[0] for line in out.splitlines() if line} >= {"readme", "adoption"}
    code, out, _err = run_cli(tmp_path, "docs", "adoption", capsys=capsys)
    assert code == 0 and out.startswith("## Adopting patchlane in another repository\n")
    assert "\n## " not in out.rstrip("\n")[3:]
    code, out, _err = run_cli(tmp_path, "docs", "readme", capsys=capsys)
    assert code == 0 and out.startswith("# patchlane\n")


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_completion_offers_the_projects_lanes_shims_and_the_docs_topics(tmp_path, capsys):
    shop = tmp_path / "shop"
    assert run_cli(tmp_path, "init", "--no-lock", *FROM, str(shop), capsys=capsys)[0] == 0
    (shop / "lanes" / "gpu.toml").write_text((shop / "lanes" / "cpu.toml").read_text())
    assert run_cli(shop, "shim", "new", "my_fix", "--lane", "cpu", capsys=capsys)[0] == 0
    code, out, _err = run_cli(shop, "completion", "--values", "lanes", capsys=capsys)
    assert code == 0 and out == "cpu\ngpu\n"
    code, out, _err = run_cli(tmp_path, "completion", "bash", capsys=capsys)
    script = tmp_path / "patchlane.bash"
    script.write_text(out)
    probe = f"""
patchlane() {{ PYTHONPATH={ROOT} {sys.executable} -m retire "$@"; }}
source {script}
c() {{ COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMPREPLY=()
      _patchlane_complete; echo "${{COMPREPLY[*]}}"; }}
c patchlane run ""
c patchlane shim new x --lane g
c patchlane verdicts m
c patchlane docs ad
"""
    result = subprocess.run(
        ["bash", "--norc", "-c", probe],
        cwd=shop,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert set(lines[0].split()) >= {"cpu", "gpu", "--strict"}
    assert lines[1:] == ["gpu", "my_fix", "adoption"]


# ---------------------------------------------------------------------------------------------
# issue 36: usage errors as a newcomer meets them


@pytest.mark.parametrize(
    ("words", "line"),
    [
        (
            ["verdict"],
            "patchlane: error: argument COMMAND: no command 'verdict' — did you mean 'verdicts'?",
        ),
        (
            ["run", "--strct"],
            (
                "patchlane run: error: unrecognized arguments: --strct (did you mean --strict?) "
                "(see `patchlane run --help`)"
            ),
        ),
        (
            ["shim", "lst"],
            "patchlane shim: error: argument ACTION: no action 'lst' — did you mean 'list'?",
        ),
        (
            ["pack", "check", "--jsn"],
            (
                "patchlane pack check: error: unrecognized arguments: --jsn (did you mean "
                "--json?) (see `patchlane pack check --help`)"
            ),
        ),
    ],
)
def test_a_usage_error_says_did_you_mean_and_points_at_its_own_help(words, line, tmp_path, capsys):
    from retire.commands import main

    with pytest.raises(SystemExit) as stopped:
        main(["--root", str(tmp_path), *words])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert err.startswith(line) and out == "", err
    assert len(err.splitlines()) == 1


def test_hidden_commands_are_not_in_the_choices_an_unknown_command_lists(tmp_path, capsys):
    from retire.commands import main
    from retire.commands.aliases import ALIASES

    with pytest.raises(SystemExit):
        main(["--root", str(tmp_path), "zzzz"])
    err = capsys.readouterr().err
    listed = err.split("(the choices: ")[1].split(")")[0].split(", ")
    assert "verdicts" in listed and "init" in listed
    assert not {alias.name for alias in ALIASES} & set(listed), err
    # no close match: no guess
    assert "did you mean" not in err


@pytest.mark.slow
def test_init_names_no_cd_into_the_folder_it_runs_in(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(tmp_path, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0, err
    (nextline,) = [line for line in out.splitlines() if line.startswith("next: ")]
    assert nextline.startswith("next: patchlane shim new my_fix"), nextline
    elsewhere = tmp_path / "elsewhere"
    code, out, err = run_cli(elsewhere, "init", "--no-lock", str(elsewhere), *FROM, capsys=capsys)
    assert "next: cd elsewhere && patchlane shim new" in out, out


def test_shim_new_makes_its_folder_as_mkdir_would(tmp_path, capsys):
    import os

    assert run_cli(tmp_path, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    umask = os.umask(0o022)
    try:
        assert run_cli(tmp_path, "shim", "new", "my_fix", capsys=capsys)[0] == 0
    finally:
        os.umask(umask)
    assert (tmp_path / "shims" / "my_fix").stat().st_mode & 0o777 == 0o755
