"""Reproducer for hopper_flce_dispatcher (CPU with a faked compute capability, or a real H100/H200).

Constructs the real megatron.core.fusions.fused_linear_cross_entropy.Platform with
torch.cuda reporting compute capability 9.0 (faked on hosts without a Hopper GPU).

without: BUG_REPRODUCED on ValueError("Unsupported architecture: 9"); FIX_VALIDATED when
         upstream dispatches cc 9.
with:    FIX_VALIDATED when the platform binds the hopper entry's forward/backward.
SKIPPED where the installed megatron-core has no fused_linear_cross_entropy (every PyPI release
up to 0.19.2: the module lives on Megatron-LM main) or, in with-mode, where the hopper entry's
CuTe DSL dependencies are missing.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys
from unittest import mock

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "hopper_flce_dispatcher"


def check(with_shim: bool) -> str:
    try:
        import torch
    except ImportError:
        raise reproducer.Skip("torch is not installed") from None
    try:
        from megatron.core.fusions import fused_linear_cross_entropy as flce
    except ImportError as exc:
        from importlib import metadata

        try:
            version = metadata.version("megatron-core")
        except metadata.PackageNotFoundError:
            version = "not installed"
        raise reproducer.Skip(
            f"megatron.core.fusions.fused_linear_cross_entropy is not importable with megatron-core "
            f"{version} ({exc}); it exists only on Megatron-LM main"
        ) from None

    real_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
    fake = contextlib.ExitStack()
    if not real_hopper:
        fake.enter_context(mock.patch.object(torch.cuda, "is_available", return_value=True))
        fake.enter_context(mock.patch.object(torch.cuda, "current_device", return_value=0))
        fake.enter_context(mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0)))
    print(f"# compute capability: {'real' if real_hopper else 'faked'} 9.x")
    flce.Platform._instance = None
    getattr(flce._get_platform, "cache_clear", lambda: None)()
    with fake:
        try:
            platform = flce.Platform()
        except ValueError as exc:
            print(f"# Platform() raised: {exc}")
            if "Unsupported architecture" in str(exc):
                return reproducer.BUG_REPRODUCED
            raise
        except ImportError as exc:
            raise reproducer.Skip(f"the hopper entry is not importable here: {exc}") from None
    where = getattr(platform.forward_func, "__module__", "?")
    print(f"# forward_func from {where}")
    return reproducer.FIX_VALIDATED if "hopper" in where or not with_shim else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
