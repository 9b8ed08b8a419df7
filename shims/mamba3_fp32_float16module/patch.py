"""mamba3_fp32_float16module: narrow dtype repair around Float16Module's blanket cast."""

from __future__ import annotations

import functools

from shims.shape import changed_parameters, unknown_shape, unpatched_source

KNOWN_SHAPES = {
    "b89cf4a3e0a830b1": "megatron-core 0.16.1-0.19.2 Float16Module.__init__ "
    "(module.bfloat16()/half())",
    # Megatron-LM main from 86e928a97f (#5929, 2026-08-11) casts through
    # convert_module_to_dtype_except_fp32_marked: tensors marked keep_in_fp32 stay fp32, but
    # nothing marks the Mamba parameters, so the bug stays and the same repair applies.
    "2f8a92e6f8777cde": "megatron-core main 0.20.0 (d98e8a64dd) Float16Module.__init__ "
    "(convert_module_to_dtype_except_fp32_marked)",
}

#: Parameter names the Mamba-2/Mamba-3 kernels consume in fp32 (inside a *Mamba* module).
FP32_NAMES = frozenset(
    {
        "A_log",
        "D",
        "dt_bias",
        "q_bias",
        "k_bias",
        "B_bias",
        "C_bias",
        "mimo_x",
        "mimo_v",
        "mimo_o",
        "mimo_z",
    }
)
KEEP_ATTR = "_keep_fp32"
_PATCHED = "__patchlane_mamba3_fp32_float16module__"


def check_shape(module) -> str | None:
    cls = getattr(module, "Float16Module", None)
    if cls is None:
        return "Float16Module is missing"
    init = cls.__dict__.get("__init__")
    if init is None:
        return "Float16Module defines no __init__"
    if getattr(init, _PATCHED, False):
        return None
    return changed_parameters(
        init, ("self", "config", "module"), "Float16Module.__init__"
    ) or unknown_shape(init, KNOWN_SHAPES, "Float16Module.__init__")


def probe(module) -> str | None:
    source = unpatched_source(module.Float16Module.__dict__["__init__"], _PATCHED)
    if source is None:
        return None
    if ".bfloat16()" in source or ".half()" in source:
        return "Float16Module casts the whole wrapped module, fp32-contract parameters included"
    return None


def fp32_parameters(model) -> dict:
    """``{qualified name: parameter}`` of the fp32 parameters that must stay fp32."""
    import torch

    selected = {}
    for module_name, owner in model.named_modules():
        is_mamba = "mamba" in type(owner).__name__.lower()
        for name, param in owner.named_parameters(recurse=False):
            if param.dtype != torch.float32:
                continue
            if getattr(param, KEEP_ATTR, False) or (is_mamba and name in FP32_NAMES):
                selected[f"{module_name}.{name}" if module_name else name] = (owner, name, param)
    return selected


def apply(module) -> None:
    cls = module.Float16Module
    original = cls.__dict__["__init__"]
    if getattr(original, _PATCHED, False):
        return

    # functools.wraps names it __init__, as the method it replaces
    @functools.wraps(original)
    def patched_init(self, config, module, *args, **kwargs):
        keep = fp32_parameters(module)
        saved = {name: param.detach().clone() for name, (_, _, param) in keep.items()}
        original(self, config, module, *args, **kwargs)
        for name, (owner, attr, _) in keep.items():
            current = getattr(owner, attr)
            current.data = saved[name]
        self._patchlane_fp32_params = tuple(sorted(keep))

    setattr(patched_init, _PATCHED, True)
    cls.__init__ = patched_init
