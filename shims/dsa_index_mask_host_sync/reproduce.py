"""Reproducer for dsa_index_mask_host_sync.

Finds the sentinel-aware DSA index-mask helper of the installed megatron-core
(dsa._scatter_topk_into_index_mask on Megatron-LM main after 0.18, or
dsa_masking.scatter_topk_into_index_mask from 0.19.0), feeds it top-k indices with -1
sentinels, and
  * on any host: counts host-syncing ops (_local_scalar_dense, is_nonzero, item, equal,
    nonzero, allclose) with a TorchDispatchMode and checks the mask against a reference;
  * on a CUDA host: also captures the call in torch.cuda.graph and replays it.

without/with: BUG_REPRODUCED when the helper syncs the host (or capture fails), FIX_VALIDATED
when it is sync-free, capture-safe and correct. SKIPPED when the installed megatron-core has no
such helper (0.16-0.18 build the mask with a plain scatter_ and no sentinels).
"""

from __future__ import annotations

import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "dsa_index_mask_host_sync"
SYNC_OPS = ("_local_scalar_dense", "is_nonzero", "item", "equal", "nonzero", "allclose")


def _helper():
    from megatron.core.transformer.experimental_attention_variant import dsa

    if callable(getattr(dsa, "_scatter_topk_into_index_mask", None)):
        return "dsa._scatter_topk_into_index_mask", dsa._scatter_topk_into_index_mask
    try:
        from megatron.core.transformer.experimental_attention_variant import dsa_masking
    except ImportError:
        return None, None
    return "dsa_masking.scatter_topk_into_index_mask", dsa_masking.scatter_topk_into_index_mask


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
    try:
        import torch
    except ImportError:
        raise reproducer.Skip("torch is not installed") from None
    try:
        name, helper = _helper()
    except ImportError as exc:
        raise reproducer.Skip(f"megatron-core with DSA is not importable: {exc}") from None
    if helper is None:
        from importlib import metadata

        raise reproducer.Skip(
            f"megatron-core {metadata.version('megatron-core')} has no sentinel-aware index-mask helper "
            "(0.16-0.18 build the mask with a plain scatter_ in unfused_dsa_fn); nothing to reproduce"
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
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up outside capture
            helper(index_mask.clone(), topk_indices)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                helper(index_mask, topk_indices)
            graph.replay()
            torch.cuda.synchronize()
            ok = torch.equal(index_mask, expected)
            print(f"# cuda graph capture: ok; replayed mask correct: {ok}")
            if not ok:
                raise RuntimeError("captured index mask differs from the reference scatter")
        except RuntimeError as exc:
            if "differs" in str(exc):
                raise
            print(f"# cuda graph capture failed: {str(exc).splitlines()[0]}")
            broken = True
    return reproducer.BUG_REPRODUCED if broken else reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
