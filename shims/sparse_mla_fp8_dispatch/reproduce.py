"""Reproducer for sparse_mla_fp8_dispatch (needs CUDA >= 9.0, megatron-core >= 0.19, tilelang and
transformer-engine with FP8). Not yet run: neither TE nor TileLang is on the device host.

Quantises query/key to TE Float8Tensors (dtype reports bf16) and calls megatron-core's
fused_sparse_mla_absorbed with DeepSeek dims (576/512).

without: BUG_REPRODUCED when the call fails on the wrapper (NULL data pointer) or the kernel silently
         receives a dense copy the caller did not ask for (detected via the quantized inputs
         reaching the dispatcher with no explicit dequantize/FP8 decision).
with:    FIX_VALIDATED when the gate dequantizes explicitly (or dispatches an FP8 variant) and the
         output equals the bf16 path on the dequantized values.
"""

from __future__ import annotations

import pathlib
import sys
import warnings

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "sparse_mla_fp8_dispatch"
SQ, BATCH, HEADS, D_TOTAL, D_V, TOPK = 256, 1, 16, 576, 512, 64


def _quantize(tensor):
    from transformer_engine.pytorch.tensor.float8_tensor import Float8Quantizer
    import torch
    import transformer_engine_torch as tex

    quantizer = Float8Quantizer(
        scale=torch.ones(1, device="cuda"), amax=torch.zeros(1, device="cuda"), fp8_dtype=tex.DType.kFloat8E4M3
    )
    return quantizer(tensor)


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    try:
        from megatron.core.transformer.experimental_attention_variant.ops import tilelang_dsa
    except ImportError as exc:
        raise reproducer.Skip(f"megatron-core >= 0.19 DSA ops are not importable: {exc}") from None
    if getattr(tilelang_dsa, "SparseMLA", None) is None:
        raise reproducer.Skip("TileLang SparseMLA kernels are unavailable (tilelang not installed)")
    try:
        gen = torch.Generator(device="cpu").manual_seed(0)
        query = (torch.randn(SQ, BATCH, HEADS, D_TOTAL, generator=gen) * 0.1).cuda().bfloat16()
        key = (torch.randn(SQ, BATCH, 1, D_TOTAL, generator=gen) * 0.1).cuda().bfloat16()
        q8, k8 = _quantize(query), _quantize(key)
    except ImportError as exc:
        raise reproducer.Skip(f"transformer-engine FP8 tensors are not available: {exc}") from None
    print(f"# Float8Tensor query: dtype reports {q8.dtype}, data_ptr={q8.data_ptr()}")
    topk = torch.stack([torch.randperm(SQ, generator=gen)[:TOPK] for _ in range(SQ)]).unsqueeze(0).cuda()
    reference = tilelang_dsa.fused_sparse_mla_absorbed(q8.dequantize(), k8.dequantize(), topk, D_TOTAL ** -0.5, D_V)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = tilelang_dsa.fused_sparse_mla_absorbed(q8, k8, topk, D_TOTAL ** -0.5, D_V)
        except RuntimeError as exc:
            print(f"# fused SparseMLA on Float8Tensor failed: {str(exc).splitlines()[0]}")
            return reproducer.BUG_REPRODUCED
    explicit = any("sparse_mla_fp8_dispatch" in str(w.message) for w in caught)
    print(f"# explicit FP8 decision at the dispatcher: {explicit}")
    if out is None or reference is None or not explicit:
        return reproducer.BUG_REPRODUCED
    same = torch.allclose(out.float(), reference.float(), rtol=1e-2, atol=1e-2)
    print(f"# output equals the bf16 path on dequantized values: {same}")
    return reproducer.FIX_VALIDATED if same else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core", "transformer-engine", "tilelang"])
