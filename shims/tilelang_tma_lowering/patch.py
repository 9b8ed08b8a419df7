"""tilelang_tma_lowering: honour TL_DISABLE_TMA_LOWER=1 as the default pass config of every compile.

TileLang never reads the variable itself: the switch is only the pass-config key
``tl.disable_tma_lower``. Every compile goes through ``KernelCache.cached`` (which also keys the
on-disk kernel cache on the pass configs) and ``JITKernel.__init__`` (the uncached path); both are
class attributes in every release from 0.1.5 to 0.1.15, so wrapping them reaches callers that
imported ``cached`` / ``JITKernel`` by value. ``normalize_pass_configs`` (the earlier hook) exists
only from 0.1.9, while mamba-ssm 2.3.x pins tilelang 0.1.8.
"""

from __future__ import annotations

import functools
import inspect
import os

ENV = "TL_DISABLE_TMA_LOWER"
KEY = "tl.disable_tma_lower"
_PATCHED = "__patchlane_tilelang_tma_lowering__"


def _enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def with_default(pass_configs):
    """A copy of ``pass_configs`` with ``tl.disable_tma_lower`` defaulted to True.

    An explicit per-kernel value (string key or ``PassConfigKey`` member, which hashes as its
    string) wins: the variable only sets the default.
    """
    merged = dict(pass_configs or {})
    if KEY not in merged:
        merged[KEY] = True
    return merged


def _targets(module):
    """(KernelCache, JITKernel) from tilelang.cache.kernel_cache, or None where missing."""
    cache = getattr(module, "KernelCache", None)
    kernel = getattr(module, "JITKernel", None)
    return cache, kernel


def check_shape(module) -> str | None:
    cache, kernel = _targets(module)
    if cache is None or not callable(getattr(cache, "cached", None)):
        return "KernelCache.cached is missing"
    if kernel is None or "__init__" not in getattr(kernel, "__dict__", {}):
        return "JITKernel.__init__ is missing"
    if getattr(cache.cached, _PATCHED, False):
        return None
    for owner, name in (
        (cache.cached, "KernelCache.cached"),
        (kernel.__init__, "JITKernel.__init__"),
    ):
        if "pass_configs" not in inspect.signature(owner).parameters:
            return f"{name} takes no pass_configs any more"
    return None


def probe(module) -> str | None:
    cache, _ = _targets(module)
    if getattr(cache.cached, _PATCHED, False) or not _enabled():
        return None
    return (
        f"{ENV}=1 is set but tilelang ignores the variable: TMA lowering stays on unless each "
        f"kernel opts out"
    )


def apply(module) -> None:
    cache, kernel = _targets(module)
    cached = cache.cached
    if getattr(cached, _PATCHED, False):
        return
    init = kernel.__init__
    init_signature = inspect.signature(init)

    @functools.wraps(cached)
    def patched_cached(self, *args, **kwargs):
        if _enabled():
            kwargs["pass_configs"] = with_default(kwargs.get("pass_configs"))
        return cached(self, *args, **kwargs)

    @functools.wraps(init)
    def patched_init(self, *args, **kwargs):
        if _enabled():
            bound = init_signature.bind(self, *args, **kwargs)
            bound.arguments["pass_configs"] = with_default(bound.arguments.get("pass_configs"))
            return init(*bound.args, **bound.kwargs)
        return init(self, *args, **kwargs)

    for function in (patched_cached, patched_init):
        setattr(function, _PATCHED, True)
    cache.cached = patched_cached
    kernel.__init__ = patched_init
