"""Render a pack's GitHub body from the shim manifest and one Markdown template per category.

Each of the seed's seven categories has its own template: the same facts (what breaks, how to
reproduce, what the change does to the numbers) under the headings a maintainer of that kind of
bug expects, plus the one paragraph of framing the category needs. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Template

from retire.core import mdsafe
from retire.history.window import Window
from retire.packs.model import CATEGORIES, Pack, PackSpec, Searched
from shims.model import ShimManifest

__all__ = ["TEMPLATES", "codify", "markdown_text", "render", "table_cell", "unwrap"]

_COMMON_HEAD = """\
$heading

$state

| | |
|---|---|
$facts

"""


@dataclass(frozen=True)
class _Framing:
    """A category's headings and its own prose around the manifest's facts."""

    # heading over the explanation
    what: str
    # after the explanation, before the reproducer
    intro: str = ""
    # heading over the numerics note
    numerics: str = "Numerics"
    # after the numerics note, before the ask
    outro: str = ""


# The prose is written wrapped for reading here and joined into one line per paragraph when the
# templates are built: GitHub renders a single newline in an issue body as a line break.
_FRAMING = {
    "graph-capture": _Framing(
        "What breaks under CUDA-graph capture",
        """
        Calls that read a device value on the host (`torch.equal`, `tensor.any()`, `.item()`,
        `nonzero`) are harmless in eager mode and abort stream capture
        (`cudaErrorStreamCaptureUnsupported`). The usual remedy keeps eager behaviour intact: gate
        validations on
        `torch.cuda.is_current_stream_capturing()`, or make the branchy code branchless
        (clamp / scatter / fixup).
        """,
    ),
    "tensor-wrapper-dispatch": _Framing(
        "The wrapper contract that breaks",
        """
        `__torch_dispatch__` wrappers look like ordinary tensors at the Python level (`.dtype`,
        `.shape`, `.contiguous()` all answer), so a dispatcher that decides from that metadata can
        hand the wrapper to code that needs the real storage, or silently change a dtype another
        library relies on.
        """,
    ),
    "kernel-numerics": _Framing(
        "What the kernel gets wrong", numerics="Numerics and scope of the check"
    ),
    "memory-footprint": _Framing(
        "Where the memory goes",
        outro="The maths is unchanged; only the working set and the summation order described "
        "above differ.",
    ),
    "integration-gap": _Framing(
        "The gap",
        """
        This is the kind of break CI misses when the tested hardware or configuration never takes
        the branch; the reproducer below takes it.
        """,
    ),
    "toolchain-bug": _Framing("Compiler / lowering failure", numerics="Workaround and its cost"),
    "legality-refactor": _Framing(
        "Why the refactor",
        "The change preserves behaviour; its purpose is to make a lowering path legal.",
    ),
}


def _template(framing: _Framing) -> Template:
    parts = [_COMMON_HEAD, f"### {framing.what}\n\n$explanation\n\n"]
    if framing.intro:
        parts.append(unwrap(framing.intro).replace("$", "$$") + "\n\n")
    parts.append("### Reproducer\n\n$reproducer\n\n")
    parts.append(f"### {framing.numerics}\n\n$numerics\n\n")
    if framing.outro:
        parts.append(unwrap(framing.outro).replace("$", "$$") + "\n\n")
    parts.append("$ask\n")
    return Template("".join(parts))


_ASK = {
    "issue": "We have a fix and can open a pull request if that is welcome.",
    "pr": "This pull request carries the fix described above.",
    "comment": "Posting here rather than opening a competing pull request; happy to adapt the "
    "change to this thread.",
    "regression": "Already fixed upstream: kept as regression coverage on our side, not filed.",
}


def unwrap(text: str) -> str:
    """Join hard-wrapped manifest prose into paragraphs (GitHub renders single newlines in
    issue bodies as line breaks)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(
        " ".join(line.strip() for line in p.splitlines() if line.strip()) for p in paragraphs
    )


# Identifiers that belong in code spans, most specific first. Each alternative is tried only on
# prose: existing code spans, links and URLs are left as they are (see _PROTECTED).
_IDENTIFIER = re.compile(
    r"""
    # einsum(…), q.float(), .item()
    (?P<call>(?<![\w.`])\.?[A-Za-z_][\w.]*\((?:[^()\n]|\([^()\n]*\))*\))
    # grad_output[0]
  | (?P<subscript>(?<![\w`])[A-Za-z_][\w.]*\[[^\]\n]{1,30}\](?!\())
    # [sq, b, h, sk]
  | (?P<shape>\[[A-Za-z_*][\w*]*(?:,\s*[A-Za-z_*][\w*]*)+\](?!\())
    # megatron-core>=0.19.2
  | (?P<spec>(?<![\w`])[A-Za-z][\w.-]*\s?(?:===|==|>=|<=|~=|!=|<|>)\s?\d[\w.*+!]*
        (?:,\s?(?:==|>=|<=|~=|!=|<|>)\s?\d[\w.*+!]*)*)
    # rtol=1e-5, reduction="none"
  | (?P<assign>(?<![\w`])[A-Za-z_][\w.]*=(?:"[^"\n]*"|'[^'\n]*'|[\w+-]+(?:\.[\w+-]+)*))
    # shims/x/patch.py
  | (?P<path>(?<![\w/`])[\w.-]+(?:/[\w.-]+)*/[\w-]+\.\w+)
    # --mode
  | (?P<flag>(?<![\w`-])--[a-z][\w-]*)
    # .dtype, ._data
  | (?P<attribute>(?<![\w.`])\.[A-Za-z_]\w*(?![\w(]))
    # megatron.core.x, torch.sum
  | (?P<dotted>(?<![\w.`])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?=[^\w(]|$))
    # _compute_index_scores
  | (?P<snake>(?<![\w`])_{0,2}[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_{0,2}(?![\w`]))
    # scatter_
  | (?P<inplace>(?<![\w`])[a-z][a-z0-9]*_(?![\w`]))
    # 0.19.2, 0.16.x-0.18.x, 2.11.0+cu130
  | (?P<version>(?<![\w.`/-])v?\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)?
        (?:\+[A-Za-z0-9.]+)?(?:\.x)?(?:-\d+\.\d+(?:\.\d+)*(?:\.x)?)?(?![\w-]|\.\w))
    # a commit
  | (?P<sha>(?<![\w`])[0-9a-f]{7,40}(?![\w`]))
""",
    re.VERBOSE,
)
_PROTECTED = re.compile(
    r"(`+).+?\1|\[[^\]\n]*\]\([^)\s]*\)|<https?://[^>\s]+>|https?://[^\s)>\]]+", re.DOTALL
)
_NOT_DOTTED = {"e.g", "i.e", "etc", "vs"}


def _span(match: re.Match) -> str:
    text, kind = match.group(0), match.lastgroup
    if kind == "dotted" and (
        text.lower() in _NOT_DOTTED or all(len(part) == 1 for part in text.split("."))
    ):
        # "e.g.", "i.e.": prose, not a module path
        return text
    if kind == "sha" and not (re.search(r"\d", text) and re.search(r"[a-f]", text)):
        # a plain number, or a hex-looking word
        return text
    return f"`{text}`"


def codify(text: str) -> str:
    """Put the identifiers in ``text`` — module paths, calls, names, versions, shapes, requirement
    specifiers, file paths, flags, commit shas — in code spans, so GitHub shows them as code and
    never reads their underscores as emphasis. Existing code spans, links and URLs are kept."""
    out, position = [], 0
    for protected in _PROTECTED.finditer(text):
        out.append(_IDENTIFIER.sub(_span, text[position : protected.start()]))
        out.append(protected.group(0))
        position = protected.end()
    out.append(_IDENTIFIER.sub(_span, text[position:]))
    return "".join(out)


def markdown_text(text: str) -> str:
    """Text for a Markdown line that GitHub shows as written: ``&``, ``<`` and ``>`` outside code
    spans, links and autolinks become entities (GitHub would drop ``<commit sha>`` as a tag)."""
    out, position = [], 0

    def escaped(part: str) -> str:
        return part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    for protected in _PROTECTED.finditer(text):
        out.append(escaped(text[position : protected.start()]))
        out.append(protected.group(0))
        position = protected.end()
    out.append(escaped(text[position:]))
    return "".join(out)


def table_cell(text: str) -> str:
    """A value safe inside one GitHub table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


#: Category slug -> body template. ``$explanation``, ``$numerics``, ``$reproducer``, ``$ask``
#: are filled from the manifest and pack.toml; the prose around them is the category's framing.
TEMPLATES: dict[str, Template] = {
    category: _template(framing) for category, framing in _FRAMING.items()
}
assert set(TEMPLATES) == set(CATEGORIES)


def _state_line(spec: PackSpec, fix: Window | None = None) -> str:
    up = spec.upstream
    searched = f" (searched {up.searched.isoformat()})" if up.searched else ""
    if up.state == Searched.NEW_REPORT:
        return (
            f"**Upstream state:** new report: no existing issue or pull request in "
            f"{spec.repository}{searched}."
        )
    if up.state == Searched.OVERLAP:
        return (
            f"**Upstream state:** overlaps {up.thread}{searched}; this is a comment on that "
            "thread, not a competing pull request."
        )
    if up.state == Searched.ALREADY_FIXED:
        where = ", ".join(
            part
            for part in (up.thread, f"released in {up.fixed_in}" if up.fixed_in else None)
            if part
        )
        # the recorded runs' own answer, with the fix commit where a mirror ordered them, and
        # how that mirror was found
        recorded = f"; our runs without the shim: {fix.markdown()}" if fix and fix.seen else ""
        found = fix.source.mirror if fix and fix.seen else None
        recorded += f" — {mdsafe.text(found.says)}" if found is not None else ""
        return (
            f"**Upstream state:** already fixed upstream ({where}){recorded}; kept as regression "
            f"coverage, not filed."
        )
    return "**Upstream state:** not filled: search the target's issues and pull requests first."


def _needs(manifest: ShimManifest) -> str:
    spec = manifest.reproducer
    if spec.min_compute_capability:
        return f"a CUDA GPU with compute capability ≥ {spec.min_compute_capability}"
    return "a CUDA GPU" if spec.needs_cuda else "CPU is enough"


def render(
    manifest: ShimManifest, spec: PackSpec, reproducer_lines: int, fix: Window | None = None
) -> Pack:
    """The pack for ``manifest`` as ``spec`` describes it; the reproducer is referenced, never
    pasted. ``fix``: the shim's fixed edge as the recorded runs show it (an already-fixed pack's
    upstream state cites it, and its fix commit: sha, subject, pull request: retire.history)."""
    reproducer_name = manifest.reproducer.path.name
    kind = "regression" if spec.already_fixed else ("comment" if spec.is_comment else spec.kind)
    title = codify(manifest.title)
    heading = f"**{title}**" if spec.is_comment else f"# {title}"
    facts = [
        ("Category", CATEGORIES[spec.category]),
        ("Affects", f"`{manifest.target.distribution}` (`{manifest.target.module}`)"),
    ]
    if manifest.target.affected is not None:
        facts.append(("Versions known affected", f"`{manifest.target.affected}`"))
    facts.append(("Reproduced against", f"`{spec.against}`"))
    facts.append(("Reproducer needs", _needs(manifest)))
    reproducer = (
        f"Attached as `{reproducer_name}` ({reproducer_lines} lines; not pasted here). "
        f"Run it against `{spec.against}` with:\n\n"
        f"{mdsafe.fence(spec.command, 'sh')}\n\n"
        "The first line of its output stamps the host (GPU, compute capability, package versions). "
        "It then prints `BUG_REPRODUCED` (exit 10) while the bug is present, `FIX_VALIDATED` "
        "(exit 0) once it is fixed, or `SKIPPED: <reason>` (exit 77) on a host that cannot run it."
    )
    body = TEMPLATES[spec.category].substitute(
        heading=heading,
        state=codify(_state_line(spec, fix)),
        facts="\n".join(f"| {name} | {table_cell(value)} |" for name, value in facts),
        explanation=codify(unwrap(manifest.explanation)),
        numerics=codify(unwrap(manifest.numerics)),
        reproducer=reproducer,
        ask=_ASK[kind],
    )
    return Pack(
        spec=spec, title=manifest.title, body=body.rstrip() + "\n", reproducer_name=reproducer_name
    )
