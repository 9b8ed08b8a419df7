"""mamba3_mimo_gqa_backward: run 1 < G < H through the G == H backward and reduce per group."""

from __future__ import annotations

import functools
import inspect
import sys

from shims.shape import function_shape, unpatched_source

FUNCTION = "mamba_mimo_bwd_combined"
#: Modules that bind mamba_mimo_bwd_combined by value (``from ...mamba3_mimo_bwd import ...``):
#: the autograd Function's backward and the varlen dispatcher's dense path.
IMPORTERS = ("mamba3_mimo", "mamba3_mimo_bwd_varlen")
#: Leading parameters of mamba_mimo_bwd_combined (state-spaces/mamba main, 2026).
PREFIX = ("dout", "q", "k", "v", "q_bias", "k_bias", "mimo_v", "mimo_o")
_PATCHED = "__patchlane_mamba3_mimo_gqa_backward__"


def check_shape(module) -> str | None:
    return function_shape(module, FUNCTION, PREFIX, _PATCHED)


def probe(module) -> str | None:
    source = unpatched_source(getattr(module, FUNCTION), _PATCHED)
    if source is None:
        return None
    if "is not currently supported" in source and "H % G" not in source:
        return "backward handles only G == 1 and G == H; 1 < G < H raises"
    return None


def expand_groups(tensor, heads: int):
    """[B, S, R, G, N] -> [B, S, R, H, N], head h reading group h // (H // G)."""
    groups = tensor.shape[3]
    return tensor.repeat_interleave(heads // groups, dim=3).contiguous()


def reduce_heads(tensor, groups: int):
    """[B, S, R, H, N] -> [B, S, R, G, N], summing the heads of each group."""
    b, s, r, h, n = tensor.shape
    return tensor.view(b, s, r, groups, h // groups, n).sum(dim=4)


def apply(module) -> None:
    original = getattr(module, FUNCTION)
    if getattr(original, _PATCHED, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def mamba_mimo_bwd_combined(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        q, k, v = bound.arguments["q"], bound.arguments["k"], bound.arguments["v"]
        groups, heads = q.shape[3], v.shape[-2]
        if groups in (1, heads) or heads % groups != 0:
            return original(*args, **kwargs)
        bound.arguments["q"] = expand_groups(q, heads)
        bound.arguments["k"] = expand_groups(k, heads)
        result = original(*bound.args, **bound.kwargs)
        expanded = tuple(bound.arguments["q"].shape)

        def fix(item):
            if hasattr(item, "shape") and tuple(item.shape) == expanded:
                return reduce_heads(item, groups)
            return item

        if isinstance(result, tuple):
            return tuple(fix(item) for item in result)
        if isinstance(result, list):
            return [fix(item) for item in result]
        return fix(result)

    setattr(mamba_mimo_bwd_combined, _PATCHED, True)
    setattr(module, FUNCTION, mamba_mimo_bwd_combined)
    # Importers that ran before the patch hold the original by value; a later import reads the
    # patched attribute.
    package = module.__name__.rpartition(".")[0]
    for name in IMPORTERS:
        importer = sys.modules.get(f"{package}.{name}")
        if importer is not None and getattr(importer, FUNCTION, None) is original:
            setattr(importer, FUNCTION, mamba_mimo_bwd_combined)
