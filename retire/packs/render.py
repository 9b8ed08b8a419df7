"""Render a pack's GitHub body from the shim manifest and one Markdown template per category.

Each of the seed's seven categories has its own template: the same facts (what breaks, how to
reproduce, what the change does to the numbers) under the headings a maintainer of that kind of
bug expects, plus the one paragraph of framing the category needs. Pure: no I/O.
"""

from __future__ import annotations

import re
from string import Template

from shims.manifest import ShimManifest

from retire.packs.model import CATEGORIES, Pack, PackSpec

__all__ = ["TEMPLATES", "render", "table_cell", "unwrap"]

_COMMON_HEAD = """\
$heading

$state

| | |
|---|---|
$facts

"""

_REPRODUCER = """\
### Reproducer

$reproducer

"""

#: Category slug -> body template. ``$explanation``, ``$numerics``, ``$reproducer``, ``$ask``
#: are filled from the manifest and pack.toml; the prose around them is the category's framing.
TEMPLATES: dict[str, Template] = {
    "graph-capture": Template(_COMMON_HEAD + """\
### What breaks under CUDA-graph capture

$explanation

Calls that read a device value on the host (`torch.equal`, `tensor.any()`, `.item()`, `nonzero`)
are harmless in eager mode and abort stream capture (`cudaErrorStreamCaptureUnsupported`). The
usual remedy keeps eager behaviour intact: gate validations on
`torch.cuda.is_current_stream_capturing()`, or make the branchy code branchless
(clamp / scatter / fixup).

""" + _REPRODUCER + """\
### Numerics

$numerics

$ask
"""),
    "tensor-wrapper-dispatch": Template(_COMMON_HEAD + """\
### The wrapper contract that breaks

$explanation

`__torch_dispatch__` wrappers look like ordinary tensors at the Python level (`.dtype`, `.shape`,
`.contiguous()` all answer), so a dispatcher that decides from that metadata can hand the wrapper
to code that needs the real storage, or silently change a dtype another library relies on.

""" + _REPRODUCER + """\
### Numerics

$numerics

$ask
"""),
    "kernel-numerics": Template(_COMMON_HEAD + """\
### What the kernel gets wrong

$explanation

""" + _REPRODUCER + """\
### Numerics and scope of the check

$numerics

$ask
"""),
    "memory-footprint": Template(_COMMON_HEAD + """\
### Where the memory goes

$explanation

""" + _REPRODUCER + """\
### Numerics

$numerics

The maths is unchanged; only the working set and the summation order described above differ.

$ask
"""),
    "integration-gap": Template(_COMMON_HEAD + """\
### The gap

$explanation

This is the kind of break CI misses when the tested hardware or configuration never takes the
branch; the reproducer below takes it.

""" + _REPRODUCER + """\
### Numerics

$numerics

$ask
"""),
    "toolchain-bug": Template(_COMMON_HEAD + """\
### Compiler / lowering failure

$explanation

""" + _REPRODUCER + """\
### Workaround and its cost

$numerics

$ask
"""),
    "legality-refactor": Template(_COMMON_HEAD + """\
### Why the refactor

$explanation

The change preserves behaviour; its purpose is to make a lowering path legal.

""" + _REPRODUCER + """\
### Numerics

$numerics

$ask
"""),
}
assert set(TEMPLATES) == set(CATEGORIES)

_ASK = {
    "issue": "We have a fix and can open a pull request if that is welcome.",
    "pr": "This pull request carries the fix described above.",
    "comment": "Posting here rather than opening a competing pull request; happy to adapt the change to this thread.",
    "regression": "Already fixed upstream: kept as regression coverage on our side, not filed.",
}


def unwrap(text: str) -> str:
    """Join hard-wrapped manifest prose into paragraphs (GitHub renders single newlines in
    issue bodies as line breaks)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines() if line.strip()) for p in paragraphs)


def table_cell(text: str) -> str:
    """A value safe inside one GitHub table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _state_line(spec: PackSpec) -> str:
    up = spec.upstream
    searched = f" (searched {up.searched.isoformat()})" if up.searched else ""
    if up.state == "new-report":
        return f"**Upstream state:** new report: no existing issue or pull request in {spec.repository}{searched}."
    if up.state == "overlap":
        return (f"**Upstream state:** overlaps {up.thread}{searched}; this is a comment on that thread, "
                "not a competing pull request.")
    if up.state == "already-fixed":
        where = ", ".join(part for part in (up.thread, f"released in {up.fixed_in}" if up.fixed_in else None) if part)
        return f"**Upstream state:** already fixed upstream ({where}); kept as regression coverage, not filed."
    return "**Upstream state:** not filled: search the target's issues and pull requests first."


def _needs(manifest: ShimManifest) -> str:
    spec = manifest.reproducer
    if spec.min_compute_capability:
        return f"a CUDA GPU with compute capability ≥ {spec.min_compute_capability}"
    return "a CUDA GPU" if spec.needs_cuda else "CPU is enough"


def render(manifest: ShimManifest, spec: PackSpec, reproducer_lines: int) -> Pack:
    """The pack for ``manifest`` as ``spec`` describes it; the reproducer is referenced, never pasted."""
    reproducer_name = manifest.reproducer.path.name
    kind = "regression" if spec.already_fixed else ("comment" if spec.is_comment else spec.kind)
    heading = f"**{manifest.title}**" if spec.is_comment else f"# {manifest.title}"
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
        f"```sh\n{spec.command}\n```\n\n"
        "The first line of its output stamps the host (GPU, compute capability, package versions). "
        "It then prints `BUG_REPRODUCED` (exit 10) while the bug is present, `FIX_VALIDATED` (exit 0) "
        "once it is fixed, or `SKIPPED: <reason>` (exit 77) on a host that cannot run it."
    )
    body = TEMPLATES[spec.category].substitute(
        heading=heading,
        state=_state_line(spec),
        facts="\n".join(f"| {name} | {table_cell(value)} |" for name, value in facts),
        explanation=unwrap(manifest.explanation),
        numerics=unwrap(manifest.numerics),
        reproducer=reproducer,
        ask=_ASK[kind],
    )
    return Pack(spec=spec, title=manifest.title, body=body.rstrip() + "\n", reproducer_name=reproducer_name)
