"""Reproducer for sparse_mla_fp8_dispatch (needs CUDA >= 9.0, megatron-core >= 0.19, tilelang and
transformer-engine with its PyTorch extension).

Quantises a bf16 query/key (DeepSeek dims 576/512, which the fused kernel admits) to real
Transformer Engine Float8Tensors (E4M3, Float8Quantizer) and shows what the wrapper reports:
.dtype (the logical bf16) against the storage dtype of ._data, and .data_ptr(). Then calls
megatron-core's fused_sparse_mla_absorbed with the Float8Tensors.

without: BUG_REPRODUCED when the dispatcher, trusting .dtype, either fails on the wrapper (a NULL
         data pointer reaching the kernel) or runs the bf16 kernel on a copy it silently
         dequantised (no FP8 decision made anywhere: the FP8 storage win is lost unnoticed).
with:    FIX_VALIDATED when the gate makes the decision explicit (an FP8 variant, or .dequantize()
         with a RuntimeWarning) and the output equals the bf16 kernel on the dequantised values.
"""

from __future__ import annotations

import warnings

from shims import reproducer

SHIM = "sparse_mla_fp8_dispatch"
SQ, BATCH, HEADS, D_TOTAL, D_V, TOPK = 256, 1, 16, 576, 512, 64
PACKAGES = [
    "torch",
    "megatron-core",
    "transformer-engine",
    "transformer-engine-cu13",
    "transformer-engine-torch",
    "tilelang",
]


def _quantize(tensor):
    import torch
    import transformer_engine_torch as tex
    from transformer_engine.pytorch.tensor.float8_tensor import Float8Quantizer

    quantizer = Float8Quantizer(
        scale=torch.ones(1, device="cuda"),
        amax=torch.zeros(1, device="cuda"),
        fp8_dtype=tex.DType.kFloat8E4M3,
    )
    return quantizer(tensor)


def _describe(name, tensor) -> None:
    storage = getattr(tensor, "_data", None)
    try:
        pointer = f"0x{tensor.data_ptr():x}"
    except RuntimeError as exc:
        pointer = f"raises {str(exc).splitlines()[0]!r}"
    print(
        f"# {name}: {type(tensor).__name__}, .dtype reports {tensor.dtype}, "
        f"._data is {getattr(storage, 'dtype', None)} at 0x{storage.data_ptr():x}, .data_ptr() "
        f"{pointer}"
        if storage is not None
        else f"# {name}: {type(tensor).__name__}, .dtype {tensor.dtype}, .data_ptr() {pointer}"
    )


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    tilelang_dsa = reproducer.require(
        "megatron.core.transformer.experimental_attention_variant.ops.tilelang_dsa",
        "megatron-core",
        hint="the DSA ops need megatron-core >= 0.19",
    )
    if getattr(tilelang_dsa, "SparseMLA", None) is None:
        raise reproducer.Skip("TileLang SparseMLA kernels are unavailable: pip install tilelang")
    gen = torch.Generator(device="cpu").manual_seed(0)
    query = (torch.randn(SQ, BATCH, HEADS, D_TOTAL, generator=gen) * 0.5).to("cuda", torch.bfloat16)
    key = (torch.randn(SQ, BATCH, 1, D_TOTAL, generator=gen) * 0.5).to("cuda", torch.bfloat16)
    topk = (
        torch.rand(BATCH, SQ, SQ, generator=gen).topk(TOPK, dim=-1).indices.to("cuda", torch.int32)
    )
    try:
        q8, k8 = _quantize(query), _quantize(key)
    except ImportError as exc:
        raise reproducer.Skip(
            f"transformer-engine's PyTorch FP8 tensors are not importable: {exc}"
        ) from None
    _describe("query", q8)
    _describe("key", k8)
    scale = D_TOTAL**-0.5
    reference = tilelang_dsa.fused_sparse_mla_absorbed(
        q8.dequantize(), k8.dequantize(), topk, scale, D_V
    )
    if reference is None:
        raise RuntimeError(
            "the fused kernel declined plain bf16 inputs at 576/512: nothing to compare with"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = tilelang_dsa.fused_sparse_mla_absorbed(q8, k8, topk, scale, D_V)
        except (RuntimeError, ValueError, TypeError) as exc:
            print(
                f"# fused SparseMLA on Float8Tensor inputs failed: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0]}"
            )
            return reproducer.BUG_REPRODUCED
    decision = [str(w.message) for w in caught if "sparse_mla_fp8_dispatch" in str(w.message)]
    print(
        f"# dispatcher returned "
        f"{None if out is None else (type(out).__name__, str(out.dtype), tuple(out.shape))}; "
        f"explicit FP8 decision: {decision[0] if decision else 'none'}"
    )
    if out is None:
        return reproducer.BUG_REPRODUCED
    diff = (out.float() - reference.float()).abs().max().item()
    same = out.shape == reference.shape and diff <= 1e-2 * max(
        reference.float().abs().max().item(), 1e-6
    )
    print(
        f"# output vs the bf16 kernel on the dequantised values: max|diff| {diff:.3e} -> "
        f"{'equal' if same else 'DIFFERENT'}"
    )
    if not decision:
        print(
            "# the kernel ran on a bf16 copy the dispatcher made without deciding to: FP8 storage "
            "silently dropped"
        )
        return reproducer.BUG_REPRODUCED
    return reproducer.FIX_VALIDATED if same else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=PACKAGES)
