"""tilelang_tma_lowering: honour TL_DISABLE_TMA_LOWER=1 as the default pass config."""

from __future__ import annotations

import functools
import os

from shims.shape import changed_parameters

ENV = "TL_DISABLE_TMA_LOWER"
KEY = "tl.disable_tma_lower"
_PATCHED = "__patchlane_tilelang_tma_lowering__"


def _enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def check_shape(module) -> str | None:
    function = getattr(module, "normalize_pass_configs", None)
    if not callable(function):
        return "normalize_pass_configs is missing"
    if getattr(function, _PATCHED, False):
        return None
    mismatch = changed_parameters(function, ("pass_configs",), "normalize_pass_configs")
    if mismatch:
        return mismatch
    key = getattr(getattr(module, "PassConfigKey", None), "TL_DISABLE_TMA_LOWER", None)
    if key is None or getattr(key, "value", key) != KEY:
        return f"PassConfigKey.TL_DISABLE_TMA_LOWER is not {KEY!r}"
    return None


def probe(module) -> str | None:
    if getattr(module.normalize_pass_configs, _PATCHED, False) or not _enabled():
        return None
    if module.normalize_pass_configs({}).get(KEY) is True:
        return None  # tilelang already honours the variable
    return f"{ENV}=1 is set but tilelang ignores it: TMA lowering stays on unless each kernel opts out"


def apply(module) -> None:
    original = module.normalize_pass_configs
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def normalize_pass_configs(pass_configs=None, *args, **kwargs):
        normalized = original(pass_configs, *args, **kwargs)
        if _enabled():
            normalized.setdefault(KEY, True)
        return normalized

    setattr(normalize_pass_configs, _PATCHED, True)
    module.normalize_pass_configs = normalize_pass_configs
