"""dsa_index_mask_host_sync: no host syncs in the DSA index-mask path (CUDA-graph capture safe)."""

from __future__ import annotations

import functools

from shims.shape import unknown_shape

SCATTER = "_scatter_topk_into_index_mask"
BOUNDS = "_build_fused_indexer_varlen_bounds"
#: Megatron-LM main (after 0.18, before the 0.19 dsa_masking split): the branchy scatter.
KNOWN_SHAPES = {"3bbcec71c8d33588": "Megatron-LM main dsa._scatter_topk_into_index_mask (torch.any / .any() branches)"}
_PATCHED = "__patchlane_dsa_index_mask_host_sync__"


def check_shape(module) -> str | None:
    scatter = getattr(module, SCATTER, None)
    if scatter is None:
        return None  # no sentinel-aware helper in dsa.py (0.16-0.18, or 0.19+ dsa_masking): probe says not needed
    if getattr(scatter, _PATCHED, False):
        return None
    return unknown_shape(scatter, KNOWN_SHAPES, SCATTER)


def probe(module) -> str | None:
    scatter = getattr(module, SCATTER, None)
    if scatter is None or getattr(scatter, _PATCHED, False):
        return None
    return f"{SCATTER} branches on torch.any()/.any() and uses torch.where(mask): host syncs under capture"


def branchless_scatter_topk_into_index_mask(index_mask, topk_indices, *, seq_chunk_size: int = 256) -> None:
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
        index_mask[:, s0:s1].scatter_reduce_(-1, idx_chunk.clamp_min(0), src, reduce="amax", include_self=True)


def apply(module) -> None:
    import torch

    scatter = getattr(module, SCATTER, None)
    if scatter is None or getattr(scatter, _PATCHED, False):
        return

    @functools.wraps(scatter)
    def _scatter(index_mask, topk_indices, *, seq_chunk_size: int = 256):
        return branchless_scatter_topk_into_index_mask(index_mask, topk_indices, seq_chunk_size=seq_chunk_size)

    setattr(_scatter, _PATCHED, True)
    setattr(module, SCATTER, _scatter)

    bounds = getattr(module, BOUNDS, None)
    if callable(bounds) and not getattr(bounds, _PATCHED, False):

        @functools.wraps(bounds)
        def _bounds(*args, **kwargs):
            # torch.equal() validations inside would sync the host; under capture take the
            # unfused indexer (None), in eager mode keep upstream's checks.
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                return None
            return bounds(*args, **kwargs)

        setattr(_bounds, _PATCHED, True)
        setattr(module, BOUNDS, _bounds)
