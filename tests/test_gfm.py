"""Pack bodies as GitHub renders them: cmark-gfm (GitHub's own renderer, through ``cmarkgfm``)
with hard line breaks on, as GitHub renders issue and pull-request bodies. Identifiers are in code
spans, no paragraph is broken mid-sentence, no underscore turns into emphasis."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from retire.packs import store
from retire.packs.render import codify
from tests.conftest import ROOT

cmarkgfm = pytest.importorskip(
    "cmarkgfm", reason="the test extra installs cmarkgfm (GitHub's cmark-gfm)"
)
from cmarkgfm.cmark import Options  # noqa: E402

PACKS = sorted(p.parent.name for p in (ROOT / "shims").glob("*/pack.toml"))


def github_html(markdown: str) -> str:
    """What GitHub shows for an issue body: GFM, and every newline inside a paragraph a <br>."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_HARDBREAKS)


class _Text(HTMLParser):
    """The rendered text outside code, links and pre blocks, and the text of each code span."""

    def __init__(self) -> None:
        super().__init__()
        self.prose: list[str] = []
        self.code: list[str] = []
        self._inside: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("code", "a", "pre"):
            self._inside.append(tag)
            if tag == "code":
                self.code.append("")

    def handle_endtag(self, tag):
        if self._inside and self._inside[-1] == tag:
            self._inside.pop()

    def handle_data(self, data):
        if "code" in self._inside:
            self.code[-1] += data
        elif not self._inside:
            self.prose.append(data)


def parts(html: str) -> _Text:
    parser = _Text()
    parser.feed(html)
    return parser


# An identifier a reader should see as code: a name with an underscore, a dotted module path, a
# call, or a version. Written independently of codify's patterns, to check what was rendered.
LOOSE_IDENTIFIER = re.compile(
    r"\b\w*_\w+\b|\b[a-z]\w+\.[a-z_]\w*(?:\.\w+)*\b|\b\w+\(\)|\b\d+\.\d+\.\d+\b"
)


@pytest.fixture(scope="module", params=PACKS)
def body(request) -> tuple[str, str]:
    return request.param, store.load_pack(ROOT, request.param).pack.body


def test_there_are_packs_to_check():
    assert len(PACKS) >= 8


@pytest.mark.slow
def test_no_paragraph_is_broken_mid_sentence(body):
    shim, markdown = body
    html = github_html(markdown)
    assert "<br" not in html, f"{shim}: a hard-wrapped paragraph renders as broken lines on GitHub"
    for paragraph in re.findall(r"<p>(.*?)</p>", html, re.DOTALL):
        assert "\n" not in paragraph, paragraph


@pytest.mark.slow
def test_identifiers_are_code_and_underscores_are_never_emphasis(body):
    shim, markdown = body
    html = github_html(markdown)
    assert "<em>" not in html, f"{shim}: an underscore became emphasis"
    rendered = parts(html)
    stray = sorted({m.group(0) for text in rendered.prose for m in LOOSE_IDENTIFIER.finditer(text)})
    assert stray == [], f"{shim}: identifiers outside code spans: {stray}"
    manifest = store.load_pack(ROOT, shim).manifest
    assert manifest.target.module in rendered.code and manifest.target.distribution in rendered.code


def test_the_dsa_indexer_body_renders_its_identifiers_as_code():
    rendered = parts(github_html(store.load_pack(ROOT, "dsa_indexer_memory").pack.body))
    for identifier in (
        "_compute_index_scores",
        "[seqlen_q, batch, index_n_heads, seqlen_k]",
        "0.19.2",
        "rtol=1e-5",
        "torch.sum",
        "einsum('sbhd,tbd->sbht', q.float(), k.float())",
    ):
        assert identifier in rendered.code, identifier


@pytest.mark.parametrize(
    ("prose", "expected"),
    [
        (
            "the DSA indexer computes q.float() then _compute_index_scores",
            "the DSA indexer computes `q.float()` then `_compute_index_scores`",
        ),
        (
            "fixed in megatron-core>=0.19.2 (commit 3f9a2b1c), e.g. torch 2.11.0+cu130",
            "fixed in `megatron-core>=0.19.2` (commit `3f9a2b1c`), e.g. torch `2.11.0+cu130`",
        ),
        (
            (
                "keep `already.code`, [a_link](https://example.org/a_b) and "
                "https://example.org/x_y.z "
                "as they are"
            ),
            (
                "keep `already.code`, [a_link](https://example.org/a_b) and "
                "https://example.org/x_y.z "
                "as they are"
            ),
        ),
        (
            "DeepSeek-V3.2 and i.e. prose, 1234567 and decade stay prose",
            "DeepSeek-V3.2 and i.e. prose, 1234567 and decade stay prose",
        ),
        (
            "set TL_DISABLE_TMA_LOWER=1 and pass --mode without to shims/x/reproduce.py",
            "set `TL_DISABLE_TMA_LOWER=1` and pass `--mode` without to `shims/x/reproduce.py`",
        ),
        (
            "scales every row by grad_output[0] over a [sq, b, h, sk] tensor",
            "scales every row by `grad_output[0]` over a `[sq, b, h, sk]` tensor",
        ),
    ],
)
def test_codify(prose, expected):
    assert codify(prose) == expected
    # idempotent: spans are never nested
    assert codify(expected) == expected
