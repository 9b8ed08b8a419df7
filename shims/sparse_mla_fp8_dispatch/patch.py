"""sparse_mla_fp8_dispatch: explicit dispatch for TE QuantizedTensor inputs to fused SparseMLA."""

from __future__ import annotations

import functools
import inspect
import warnings

from shims.shape import function_shape

FUNCTION = "fused_sparse_mla_absorbed"
PARAMS = ("query", "key", "topk_indices", "softmax_scale", "v_channels")
FP8_VARIANT = "fused_sparse_mla_absorbed_fp8"
_PATCHED = "__patchlane_sparse_mla_fp8_dispatch__"
_warned = False


def is_quantized(tensor) -> bool:
    """A Transformer Engine QuantizedTensor (Float8Tensor, MXFP8Tensor, ...) by class lineage."""
    return any(cls.__name__ == "QuantizedTensor" for cls in type(tensor).__mro__) and callable(
        getattr(tensor, "dequantize", None)
    )


def check_shape(module) -> str | None:
    return function_shape(module, FUNCTION, PARAMS, _PATCHED)


def probe(module) -> str | None:
    function = getattr(module, FUNCTION)
    if getattr(function, _PATCHED, False):
        return None
    try:
        dispatches = "QuantizedTensor" in inspect.getsource(function)
    # re-compiled by another shim without a source file
    except (OSError, TypeError):
        dispatches = "QuantizedTensor" in function.__code__.co_names
    if dispatches:
        # upstream dispatches on the wrapper itself
        return None
    return "dispatcher trusts .dtype, which a TE QuantizedTensor reports as bf16 over FP8 storage"


def apply(module) -> None:
    original = getattr(module, FUNCTION)
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def fused_sparse_mla_absorbed(
        query, key, topk_indices, softmax_scale, v_channels, *args, **kwargs
    ):
        global _warned
        if is_quantized(query) or is_quantized(key):
            fp8_variant = getattr(module, FP8_VARIANT, None)
            if callable(fp8_variant):
                return fp8_variant(
                    query, key, topk_indices, softmax_scale, v_channels, *args, **kwargs
                )
            if not _warned:
                _warned = True
                warnings.warn(
                    "patchlane sparse_mla_fp8_dispatch: FP8 QuantizedTensor inputs to SparseMLA "
                    "are "
                    "dequantized to bf16 (no FP8 SparseMLA variant registered); the FP8 storage "
                    "win is lost",
                    RuntimeWarning,
                    stacklevel=2,
                )
            query = query.dequantize() if is_quantized(query) else query
            key = key.dequantize() if is_quantized(key) else key
        return original(query, key, topk_indices, softmax_scale, v_channels, *args, **kwargs)

    setattr(fused_sparse_mla_absorbed, _PATCHED, True)
    setattr(module, FUNCTION, fused_sparse_mla_absorbed)
