"""Reproducer for dsa_index_mask_host_sync.

Finds the sentinel-aware DSA index-mask helper of the installed megatron-core
(dsa_masking.scatter_topk_into_index_mask: host-syncing on Megatron-LM main from da482cf5c8 to
027fa4aaba, 2026-06-25..07-08; capture safe from d1cab16a01 and in every release from 0.19.0;
or the seed fork's dsa._scatter_topk_into_index_mask), feeds it top-k indices with -1 sentinels,
and
  * on any host: counts host-syncing ops (_local_scalar_dense, is_nonzero, item, equal,
    nonzero, allclose) with a TorchDispatchMode and checks the mask against a reference;
  * on a CUDA host: also captures the call in torch.cuda.graph and replays it, and captures
    build_fused_indexer_varlen_bounds (its torch.equal validations) for a causal mask.

without/with: BUG_REPRODUCED when a helper syncs the host (or a capture fails), FIX_VALIDATED
when both are sync-free, capture-safe and correct. SKIPPED when the installed megatron-core has no
such helper (0.16-0.18 build the mask with a plain scatter_ and no sentinels).
"""

from __future__ import annotations

from shims import reproducer

SHIM = "dsa_index_mask_host_sync"
SYNC_OPS = ("_local_scalar_dense", "is_nonzero", "item", "equal", "nonzero", "allclose")


def _helper():
    """(name, scatter helper, bounds builder or None), looked up at call time (after the shim)."""
    from megatron.core.transformer.experimental_attention_variant import dsa

    if callable(getattr(dsa, "_scatter_topk_into_index_mask", None)):
        return (
            "dsa._scatter_topk_into_index_mask",
            dsa._scatter_topk_into_index_mask,
            getattr(dsa, "_build_fused_indexer_varlen_bounds", None),
        )
    try:
        from megatron.core.transformer.experimental_attention_variant import dsa_masking
    except ImportError:
        return None, None, None
    return (
        "dsa_masking.scatter_topk_into_index_mask",
        dsa_masking.scatter_topk_into_index_mask,
        getattr(dsa_masking, "build_fused_indexer_varlen_bounds", None),
    )


def _capture(torch, label, fn):
    """Capture fn() in a CUDA graph and replay it; True when capture works."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    # warm-up outside capture
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
        graph.replay()
        torch.cuda.synchronize()
    except RuntimeError as exc:
        print(f"# cuda graph capture of {label} failed: {str(exc).splitlines()[0]}")
        return False
    print(f"# cuda graph capture of {label}: ok")
    return True


def _inputs(torch, device):
    gen = torch.Generator(device="cpu").manual_seed(0)
    b, sq, sk, topk = 2, 300, 256, 32
    scores = torch.rand(b, sq, sk, generator=gen)
    topk_indices = scores.topk(topk, dim=-1).indices
    sentinel = torch.rand(b, sq, topk, generator=gen) < 0.25
    topk_indices = topk_indices.masked_fill(sentinel, -1).to(device)
    index_mask = torch.full((b, sq, sk), float("-inf"), device=device)
    expected = torch.full((b, sq, sk), float("-inf"))
    for bi, qi, ti in (topk_indices.cpu() >= 0).nonzero().tolist():
        expected[bi, qi, topk_indices[bi, qi, ti]] = 0.0
    return index_mask, topk_indices, expected.to(device)


def _count_syncs(torch, fn, *args):
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class SyncCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in SYNC_OPS:
                seen.append(name)
            return func(*args, **(kwargs or {}))

    with SyncCounter():
        fn(*args)
    return seen


def check(with_shim: bool) -> str:
    torch = reproducer.require("torch")
    try:
        name, helper, bounds = _helper()
    except ImportError as exc:
        raise reproducer.Skip(f"megatron-core with DSA is not importable: {exc}") from None
    if helper is None:
        from importlib import metadata

        raise reproducer.Skip(
            f"megatron-core {metadata.version('megatron-core')} has no sentinel-aware index-mask "
            f"helper "
            "(0.16-0.18 build the mask with a plain scatter_ in unfused_dsa_fn); nothing to "
            "reproduce"
        )
    print(f"# helper under test: {name}")

    index_mask, topk_indices, expected = _inputs(torch, "cpu")
    syncs = _count_syncs(torch, helper, index_mask, topk_indices)
    correct = torch.equal(index_mask, expected)
    print(f"# cpu: host-syncing ops: {len(syncs)} {sorted(set(syncs))}; mask correct: {correct}")
    if not correct:
        raise RuntimeError("index mask differs from the reference scatter")
    broken = bool(syncs)

    if torch.cuda.is_available():
        index_mask, topk_indices, expected = _inputs(torch, "cuda")
        captured = _capture(torch, name, lambda: helper(index_mask, topk_indices))
        if captured and not torch.equal(index_mask, expected):
            raise RuntimeError("captured index mask differs from the reference scatter")
        broken = broken or not captured
        if callable(bounds):
            sq = skv = 256
            causal = torch.full((sq, skv), float("-inf"), device="cuda").triu_(1)
            kwargs = {
                "sq": sq,
                "skv": skv,
                "device": torch.device("cuda"),
                "mask": causal,
                "varlen_starts": None,
                "varlen_ends": None,
                "key_positions": None,
            }
            eager = bounds(**kwargs)
            print(f"# {bounds.__name__} eager: {'fused bounds' if eager is not None else 'None'}")
            broken = not _capture(torch, bounds.__name__, lambda: bounds(**kwargs)) or broken
    return reproducer.BUG_REPRODUCED if broken else reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
