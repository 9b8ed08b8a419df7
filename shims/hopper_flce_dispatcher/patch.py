"""hopper_flce_dispatcher: route cc 9.x to linear_cross_entropy.hopper.entry."""

from __future__ import annotations

import functools
import importlib
import inspect

from shims.shape import unknown_shape

#: Megatron-LM main (commit 020c805b) Platform.__init__: cc[0] == 10 or ValueError.
KNOWN_SHAPES = {"ebd7bb2095ae907f": "Megatron-LM main fused_linear_cross_entropy.Platform.__init__ (Blackwell only)"}
_PATCHED = "__patchlane_hopper_flce_dispatcher__"


def check_shape(module) -> str | None:
    platform = getattr(module, "Platform", None)
    if platform is None or "__init__" not in platform.__dict__:
        return "Platform.__init__ is missing"
    init = platform.__dict__["__init__"]
    if getattr(init, _PATCHED, False):
        return None
    return unknown_shape(init, KNOWN_SHAPES, "Platform.__init__")


def probe(module) -> str | None:
    init = module.Platform.__dict__["__init__"]
    if getattr(init, _PATCHED, False):
        return None
    source = inspect.getsource(init)
    if "hopper" in source or "cc[0] == 9" in source:
        return None
    return "Platform.__init__ wires only cc 10 (Blackwell); cc 9 raises 'Unsupported architecture: 9'"


def apply(module) -> None:
    import torch

    platform = module.Platform
    original = platform.__dict__["__init__"]
    if getattr(original, _PATCHED, False):
        return
    package = module.__name__.rpartition(".")[0]

    @functools.wraps(original)
    def __init__(self) -> None:
        if getattr(self, "_initialized", False):
            return
        if torch.cuda.is_available():
            major, _ = torch.cuda.get_device_capability(torch.cuda.current_device())
            if major == 9:
                entry = importlib.import_module(f"{package}.linear_cross_entropy.hopper.entry")
                self.forward_func = entry.forward
                self.backward_func = entry.backward
                self._initialized = True
                return
        original(self)

    setattr(__init__, _PATCHED, True)
    platform.__init__ = __init__
