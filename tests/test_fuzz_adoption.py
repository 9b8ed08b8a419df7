"""Hypothesis over what `patchlane init` merges into a shop's files (issue 30, class 6): README.md
and .gitignore with any line ends, trailing blank lines and bytes, and .pre-commit-config.yaml
documents written in many styles (and garbage). Every outcome is an edit that only inserts
lines — in the file's own line ends — a note that leaves the file alone, or one input-error line
for a file that is not UTF-8; never another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retire.core.errors import InputError
from retire.scaffold import kept, newline_of
from retire.scaffold.merge import merge_precommit
from retire.scaffold.project import plan_init
from retire.scaffold.source import parse_source

pytestmark = pytest.mark.slow

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "patchlane[engine]==0.1.0"
ENTRY = (
    "- repo: local\n  hooks:\n  - id: patchlane-lock-check\n    name: lock\n"
    "    entry: patchlane lock --check\n    language: python\n"
)

_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=30,
)


@st.composite
def documents(draw) -> str:
    """A text file as shops have them: lines, one line end style (or mixed), blank lines at the
    end, maybe no final line end, maybe a byte-order mark."""
    lines = draw(st.lists(_line, max_size=8))
    ends = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    text = "".join(
        line + (draw(st.sampled_from(["\n", "\r\n"])) if ends == "mixed" else ends)
        for line in lines
    )
    text += (ends if ends != "mixed" else "\n") * draw(st.integers(0, 3))
    if draw(st.booleans()) and text:
        text = text.rstrip("\r\n")
    return ("\ufeff" if draw(st.booleans()) else "") + text


def _plan(files: dict[str, bytes]):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, body in files.items():
            (root / name).write_bytes(body)
        return plan_init(root, parse_source(SOURCE, root), python="3.12")


@FUZZ
@given(readme=documents(), ignore=documents())
def test_readme_and_gitignore_only_get_lines_inserted_in_their_own_line_ends(readme, ignore):
    plan = _plan({"README.md": readme.encode(), ".gitignore": ignore.encode()})
    for name, before in (("README.md", readme), (".gitignore", ignore)):
        after = plan.edit.get(name)
        if after is None:
            continue
        assert kept(before, after), name
        added = after.removeprefix(before)
        if "\r\n" in before and "\n" not in before.replace("\r\n", ""):
            # a file in CRLF gets CRLF
            assert added.count("\n") == added.count("\r\n"), (name, added)
        if newline_of(before) == "\n" and "\r" not in before:
            assert "\r" not in added
    if "## Patch lane" not in readme:
        assert plan.edit["README.md"].count("## Patch lane") == 1
    ignored = plan.edit.get(".gitignore", plan.create.get(".gitignore", ignore)).splitlines()
    assert ".patchlane/" in ignored and ".nox/" in ignored


@FUZZ
@given(body=st.binary(max_size=200))
# a last line ended by a lone CR keeps it: no "\n" is appended right after it (they would fuse)
@example(body=b"\r")
@example(body=b"# shop\r\nnotes\r")
def test_any_bytes_in_readme_are_merged_or_one_input_error(body):
    try:
        plan = _plan({"README.md": body})
    except InputError as exc:
        assert "\n" not in str(exc) and "README.md" in str(exc) and "UTF-8" in str(exc)
        return
    assert kept(body.decode("utf-8"), plan.edit.get("README.md", body.decode("utf-8")))


_scalar = st.one_of(
    st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.lists(st.text(max_size=5))
)
_hook = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=12)},
    optional={"name": st.text(max_size=12), "args": st.lists(st.text(max_size=8), max_size=3)},
)
_repo = st.fixed_dictionaries(
    {
        "repo": st.sampled_from(["local", "https://github.com/pre-commit/pre-commit-hooks"]),
        "hooks": st.lists(_hook, max_size=3),
    },
    optional={"rev": st.text(min_size=1, max_size=8)},
)


@st.composite
def configs(draw) -> str:
    """A pre-commit config: keys before `repos:` in any order, its list in block or flow style, at
    any indent, comments, CRLF — or the same text cut anywhere."""
    document = {
        **draw(st.dictionaries(st.sampled_from(["default_stages", "fail_fast", "ci"]), _scalar)),
        "repos": draw(st.lists(_repo, max_size=3)),
    }
    text = yaml.safe_dump(
        document,
        sort_keys=False,
        default_flow_style=draw(st.sampled_from([False, None, True])),
        indent=draw(st.sampled_from([2, 4])),
        allow_unicode=draw(st.booleans()),
    )
    if draw(st.booleans()):
        text = "# our hooks\n" + text
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(text=configs())
def test_a_pre_commit_config_gets_the_entry_appended_or_is_left_alone(text):
    merged = merge_precommit(text, ENTRY)
    if merged.text is None:
        assert merged.note and "\n" not in merged.note
        return
    assert kept(text, merged.text)
    before = yaml.safe_load(text)
    after = yaml.safe_load(merged.text)
    assert after == {**before, "repos": [*before["repos"], yaml.safe_load(ENTRY)[0]]}
    if "\r\n" in text:
        assert merged.text.count("\n") == merged.text.count("\r\n")


@FUZZ
@given(text=st.text(max_size=300))
def test_any_text_as_a_pre_commit_config_never_raises(text):
    merged = merge_precommit(text, ENTRY)
    assert merged.text is None or kept(text, merged.text)
