"""sparse_mla_dim_guard: lift the 576/512 specialisation of megatron-core's TileLang SparseMLA."""

from __future__ import annotations

import importlib
import inspect
import linecache
import textwrap

from shims.shape import unknown_shape

OPS = "megatron.core.transformer.experimental_attention_variant.ops"
# (module suffix, attribute, known fingerprint, [(old, new, expected count)])
EDITS = (
    (
        "tilelang_dsa",
        "fused_sparse_mla_absorbed",
        "5b4ca4844c07a1ac",
        [
            (
                "if query.size(-1) != 576 or v_channels != 512:",
                (
                    "if v_channels % 16 != 0 or query.size(-1) <= v_channels or (query.size(-1) - "
                    "v_channels) % 16 != 0:"
                ),
                1,
            ),
            (
                "SparseMLA.apply(query_bshd, key_bshd, indices_bsgk, softmax_scale)",
                "SparseMLA.apply(query_bshd, key_bshd, indices_bsgk, softmax_scale, v_channels)",
                1,
            ),
        ],
    ),
    (
        "tilelang_sparse_mla_fwd",
        "sparse_mla_fwd_interface",
        "9a25100bebca22eb",
        [
            ("dim_plus_tail_dim == 576", "dim_plus_tail_dim % 16 == 0", 1),
        ],
    ),
    (
        "tilelang_sparse_mla_bwd",
        "sparse_mla_bwd",
        "181130e0543d72fc",
        [
            ("D = 512", "D = do.shape[-1]", 1),
        ],
    ),
    (
        "sparse_mla",
        "SparseMLA",
        "a3576b90cef98f1f",
        [
            (
                "def forward(ctx, q, kv, indices, scaling):",
                "def forward(ctx, q, kv, indices, scaling, d_v=512):",
                1,
            ),
            ("ctx.scaling = scaling", "ctx.scaling = scaling; ctx.d_v = d_v", 1),
            (
                "sparse_mla_fwd_interface(q, kv, indices, sm_scale=scaling)",
                "sparse_mla_fwd_interface(q, kv, indices, sm_scale=scaling, d_v=ctx.d_v)",
                2,
            ),
            ("return tl_dq, tl_dkv, None, None", "return tl_dq, tl_dkv, None, None, None", 1),
        ],
    ),
)
_PATCHED = "__patchlane_sparse_mla_dim_guard__"


def _module(module, suffix):
    """The target itself for its own edits; the sibling ops module otherwise."""
    if suffix == "tilelang_dsa" or module.__name__.endswith("." + suffix):
        return module
    return importlib.import_module(f"{OPS}.{suffix}")


def check_shape(module) -> str | None:
    if getattr(module, _PATCHED, False):
        return None
    for suffix, name, known, edits in EDITS:
        try:
            owner = _module(module, suffix)
        except ImportError as exc:
            return f"{OPS}.{suffix} is not importable: {exc}"
        obj = getattr(owner, name, None)
        if obj is None:
            if name == "SparseMLA" and hasattr(owner, "HAVE_TILELANG_SPARSE_MLA"):
                # tilelang missing: the class is None and there is no fused path at all
                continue
            return f"{suffix}.{name} is missing"
        mismatch = unknown_shape(obj, known, f"{suffix}.{name}")
        if mismatch:
            return mismatch
        source = inspect.getsource(obj)
        for old, _, count in edits:
            if source.count(old) != count:
                return f"{suffix}.{name}: expected {count}x {old!r}, found {source.count(old)}"
    return None


def probe(module) -> str | None:
    if getattr(module, _PATCHED, False):
        return None
    if getattr(module, "SparseMLA", None) is None:
        # no TileLang: the fused SparseMLA path does not exist, nothing to widen
        return None
    return (
        "fused SparseMLA admits only dim_plus_tail_dim=576, v_channels=512; other MLA dims fall "
        "back to the unfused path"
    )


def apply(module) -> None:
    if getattr(module, _PATCHED, False):
        return
    rebuilt = {}
    for suffix, name, _, edits in EDITS:
        owner = _module(module, suffix)
        obj = getattr(owner, name)
        source = textwrap.dedent(inspect.getsource(obj))
        for old, new, _ in edits:
            source = source.replace(old, new)
        namespace = owner.__dict__
        filename = f"<patchlane sparse_mla_dim_guard: {owner.__name__}.{name}>"
        # Register the rebuilt source so inspect.getsource() (other shims' probes, tracebacks)
        # still works on the re-compiled functions.
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        # The patch is upstream's own source with the edits above, compiled where it lived.
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102
        rebuilt[(suffix, name)] = namespace[name]
    # Re-bind the names other modules imported by value.
    sparse_mla = _module(module, "sparse_mla")
    sparse_mla.sparse_mla_bwd = rebuilt[("tilelang_sparse_mla_bwd", "sparse_mla_bwd")]
    sparse_mla.sparse_mla_fwd_interface = rebuilt[
        ("tilelang_sparse_mla_fwd", "sparse_mla_fwd_interface")
    ]
    module.SparseMLA = rebuilt[("sparse_mla", "SparseMLA")]
    setattr(module, _PATCHED, True)
