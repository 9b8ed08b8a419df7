"""dsa_indexer_memory: per-head streaming accumulation for DSA index scores.

Upstream (megatron-core 0.16.x: ``DSAIndexer._compute_index_scores``; 0.17+: module-level
``_compute_index_scores``) materialises ``einsum('sbhd,tbd->sbht')`` in fp32 before summing
over heads. The replacement keeps only one ``[b, sq, sk]`` head slice alive at a time.
"""

from __future__ import annotations

import inspect

from shims.shape import unknown_shape, unpatched_source

#: Normalised-source fingerprints (docstrings stripped, ``ast.unparse``) of the upstream
#: functions this patch was written against, read from the released wheels.
KNOWN_SHAPES = {
    "56b7bee5c4ed2c7b": "megatron-core 0.16.1 DSAIndexer._compute_index_scores (method)",
    "9c1bfbdc17cdd476": "megatron-core 0.17.x-0.18.x _compute_index_scores(q, weights, k)",
    "ac003a179923e3e2": "megatron-core 0.19.x _compute_index_scores(q, weights, k, use_relu=True)",
}

_PATCHED = "__patchlane_dsa_indexer_memory__"


def _target(module):
    """(owner, attribute name, is_method) of the upstream index-score function, or None."""
    function = getattr(module, "_compute_index_scores", None)
    if callable(function):
        return module, "_compute_index_scores", False
    indexer = getattr(module, "DSAIndexer", None)
    if indexer is not None and callable(getattr(indexer, "_compute_index_scores", None)):
        return indexer, "_compute_index_scores", True
    return None


def check_shape(module) -> str | None:
    found = _target(module)
    if found is None:
        return "neither _compute_index_scores nor DSAIndexer._compute_index_scores exists"
    owner, name, _ = found
    current = owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)
    if getattr(current, _PATCHED, False):
        # already ours (activate() in a process that applied it before)
        return None
    return unknown_shape(current, KNOWN_SHAPES, name)


def probe(module) -> str | None:
    owner, name, _ = _target(module)
    source = unpatched_source(getattr(owner, name), _PATCHED)
    if source is not None and "sbhd,tbd->sbht" in source:
        return "index scores materialise fp32 [sq, b, h, sk] via einsum before the head sum"
    return None


def streamed_index_scores(q, weights, k, use_relu: bool = True):
    """Index scores ``[b, sq, sk]`` (fp32) accumulated one index head at a time.

    q: [sq, b, h, d]; weights: [sq, b, h]; k: [sk, b, d] — the upstream contract.
    """
    import torch

    sq, b, heads, _ = q.shape
    sk = k.shape[0]
    # [b, d, sk]
    key_t = k.float().permute(1, 2, 0)
    w = weights.float()
    out = torch.zeros((b, sq, sk), dtype=torch.float32, device=q.device)
    for head in range(heads):
        # [b, sq, sk]
        scores = torch.bmm(q[:, :, head, :].float().transpose(0, 1), key_t)
        if use_relu:
            scores.relu_()
        scores.mul_(w[:, :, head].transpose(0, 1).unsqueeze(-1))
        out.add_(scores)
        del scores
    return out


def apply(module) -> None:
    owner, name, is_method = _target(module)
    original = getattr(owner, name)
    if getattr(original, _PATCHED, False):
        return
    if is_method:

        def _compute_index_scores(self, q, weights, k):
            return streamed_index_scores(q, weights, k)
    else:
        accepts_relu = "use_relu" in inspect.signature(original).parameters

        if accepts_relu:

            def _compute_index_scores(q, weights, k, use_relu: bool = True):
                return streamed_index_scores(q, weights, k, use_relu=use_relu)
        else:

            def _compute_index_scores(q, weights, k):
                return streamed_index_scores(q, weights, k)

    _compute_index_scores.__doc__ = original.__doc__
    _compute_index_scores.__wrapped__ = original
    setattr(_compute_index_scores, _PATCHED, True)
    setattr(owner, name, _compute_index_scores)
