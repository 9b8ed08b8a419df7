"""dsa_index_mask_host_sync: no host syncs in the DSA index-mask path (CUDA-graph capture safe).

Where the syncing code really is upstream (Megatron-LM mirror, ``git log -S``): ``dsa_masking.py``
as created on main by da482cf5c8 ("[split 4/4] Enable DSA CP and THD hooks", 2026-06-25) holds a
``scatter_topk_into_index_mask`` that branches on ``torch.any(idx_chunk < 0)`` /
``valid_topk.any()`` and a ``build_fused_indexer_varlen_bounds`` that validates with
``torch.equal``; d1cab16a01 (2026-07-08, before core_v0.19.0) made both capture safe. dsa.py calls
both through the module (``dsa_masking.<name>(...)``), so replacing the module attributes reaches
every caller. The seed's fork carried the same helper inside dsa.py as
``_scatter_topk_into_index_mask``; that layout is still recognised by its fingerprint.
"""

from __future__ import annotations

import functools
import inspect
import sys

from shims.shape import fingerprint, unknown_shape

#: (owner module suffix, scatter helper, bounds builder)
LOCATIONS = (
    # seed fork layout
    ("dsa", "_scatter_topk_into_index_mask", "_build_fused_indexer_varlen_bounds"),
    # upstream
    ("dsa_masking", "scatter_topk_into_index_mask", "build_fused_indexer_varlen_bounds"),
)
#: Host-syncing shapes this patch was written for.
KNOWN_SHAPES = {
    "3bbcec71c8d33588": "seed fork dsa._scatter_topk_into_index_mask (torch.any / .any() branches)",
    "5e313354896eb76e": "Megatron-LM main da482cf5c8..027fa4aaba "
    "dsa_masking.scatter_topk_into_index_mask",
}
#: Host syncs that break CUDA-graph capture when they appear in the helpers' source.
SYNCS = ("torch.any(", ".any():", "torch.where(valid", "torch.equal(")
_PATCHED = "__patchlane_dsa_index_mask_host_sync__"


def _owner(module, suffix: str):
    if suffix == "dsa":
        return module
    owner = getattr(module, suffix, None)
    if owner is None:
        owner = sys.modules.get(module.__name__.rpartition(".")[0] + "." + suffix)
    return owner


def _found(module):
    """(owner, scatter name, bounds name, scatter) of the first location that has the helper."""
    for suffix, scatter_name, bounds_name in LOCATIONS:
        owner = _owner(module, suffix)
        scatter = getattr(owner, scatter_name, None) if owner is not None else None
        if callable(scatter):
            return owner, scatter_name, bounds_name, scatter
    return None, None, None, None


def _syncs(function) -> bool:
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    return any(sync in source for sync in SYNCS)


def check_shape(module) -> str | None:
    owner, scatter_name, _, scatter = _found(module)
    if scatter is None or getattr(scatter, _PATCHED, False):
        # no sentinel-aware helper (0.16-0.18): probe says not needed
        return None
    if owner is not module and not _syncs(scatter):
        # upstream's capture-safe helper (core_v0.19.0 on): probe says not needed
        return None
    return unknown_shape(scatter, KNOWN_SHAPES, scatter_name)


def probe(module) -> str | None:
    _, scatter_name, bounds_name, scatter = _found(module)
    if scatter is None or getattr(scatter, _PATCHED, False):
        return None
    if fingerprint(scatter) not in KNOWN_SHAPES and not _syncs(scatter):
        return None
    return (
        f"{scatter_name} branches on torch.any()/.any() (and {bounds_name} validates with "
        "torch.equal): host syncs that fail CUDA-graph capture"
    )


def branchless_scatter_topk_into_index_mask(
    index_mask, topk_indices, *, seq_chunk_size: int = 256
) -> None:
    """Set index_mask[b, q, k] = 0 for every valid (>= 0) top-k k; -1 sentinels change nothing.

    Clamp the sentinels to a legal index, scatter with amax where invalid slots carry -inf
    (amax(x, -inf) == x), so no value ever leaves the device and no Python branch depends on data.
    """
    import torch

    b, sq, _ = index_mask.shape
    assert topk_indices.ndim == 3, "topk_indices must be [b, sq, topk]"
    assert topk_indices.shape[:2] == (b, sq), "topk_indices shape mismatch"
    device = index_mask.device
    seq_chunk_size = max(1, int(seq_chunk_size))
    zero = torch.zeros((), dtype=index_mask.dtype, device=device)
    minus_inf = torch.full((), float("-inf"), dtype=index_mask.dtype, device=device)
    for s0 in range(0, sq, seq_chunk_size):
        s1 = min(s0 + seq_chunk_size, sq)
        idx_chunk = topk_indices[:, s0:s1]
        if idx_chunk.dtype != torch.int64 or idx_chunk.device != device:
            idx_chunk = idx_chunk.to(dtype=torch.int64, device=device)
        valid = idx_chunk >= 0
        src = torch.where(valid, zero, minus_inf)
        index_mask[:, s0:s1].scatter_reduce_(
            -1, idx_chunk.clamp_min(0), src, reduce="amax", include_self=True
        )


def apply(module) -> None:
    import torch

    owner, scatter_name, bounds_name, scatter = _found(module)
    if scatter is None or getattr(scatter, _PATCHED, False):
        return

    @functools.wraps(scatter)
    def _scatter(index_mask, topk_indices, *, seq_chunk_size: int = 256):
        return branchless_scatter_topk_into_index_mask(
            index_mask, topk_indices, seq_chunk_size=seq_chunk_size
        )

    setattr(_scatter, _PATCHED, True)
    setattr(owner, scatter_name, _scatter)

    bounds = getattr(owner, bounds_name, None)
    if callable(bounds) and not getattr(bounds, _PATCHED, False):

        @functools.wraps(bounds)
        def _bounds(*args, **kwargs):
            # torch.equal() validations inside would sync the host; under capture take the
            # unfused indexer (None), in eager mode keep upstream's checks.
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                return None
            return bounds(*args, **kwargs)

        setattr(_bounds, _PATCHED, True)
        setattr(owner, bounds_name, _bounds)
