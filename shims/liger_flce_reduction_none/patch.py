"""liger_flce_reduction_none: row-broadcast backward for Liger FLCE with reduction="none"."""

from __future__ import annotations

import inspect
import warnings

from shims.shape import changed_parameters

#: The leading forward() parameters this wrapper binds by name (same in liger-kernel 0.6.5-0.8.5).
FORWARD_PREFIX = (
    "ctx",
    "_input",
    "weight",
    "target",
    "bias",
    "ce_weight",
    "ignore_index",
    "lse_square_scale",
    "label_smoothing",
    "reduction",
    "softcap",
    "return_z_loss",
)
_ORIGINAL = "__patchlane_original_apply__"
_warned: set[str] = set()


def check_shape(module) -> str | None:
    cls = getattr(module, "LigerFusedLinearCrossEntropyFunction", None)
    if cls is None:
        return "LigerFusedLinearCrossEntropyFunction is missing"
    if not callable(getattr(module, "fused_linear_cross_entropy_forward", None)):
        return "fused_linear_cross_entropy_forward is missing"
    return changed_parameters(
        cls.forward, FORWARD_PREFIX, "LigerFusedLinearCrossEntropyFunction.forward"
    )


def probe(module) -> str | None:
    if _ORIGINAL in module.LigerFusedLinearCrossEntropyFunction.__dict__:
        return None
    params = inspect.signature(module.fused_linear_cross_entropy_forward).parameters
    if "token_grad_output" in params:
        # 0.8.2+: per-token grad_output folded into the chunked logits gradient
        return None
    return "reduction='none' backward scales every row by grad_output[0] (element_mul_kernel)"


def _chunk_rows(vocab: int) -> int:
    # <= 256 MiB of fp32 logits per chunk
    return max(1, min(4096, (1 << 26) // max(1, vocab)))


def _make_function():
    import torch

    class RowBroadcastFLCE(torch.autograd.Function):
        """Identity on Liger's per-token loss; backward recomputes exact per-row gradients."""

        @staticmethod
        def forward(ctx, loss, _input, weight, bias, target, ignore_index):
            ctx.save_for_backward(_input, weight, bias, target)
            ctx.ignore_index = ignore_index
            ctx.has_bias = bias is not None
            return loss.clone()

        @staticmethod
        def backward(ctx, grad_output):
            _input, weight, bias, target = ctx.saved_tensors
            rows = _input.shape[0]
            w32 = weight.float()
            grad_input = torch.empty_like(_input) if ctx.needs_input_grad[1] else None
            grad_weight = torch.zeros_like(w32) if ctx.needs_input_grad[2] else None
            grad_bias = (
                torch.zeros(weight.shape[0], dtype=torch.float32, device=weight.device)
                if ctx.has_bias and ctx.needs_input_grad[3]
                else None
            )
            go = grad_output.reshape(-1).float()
            step = _chunk_rows(weight.shape[0])
            for start in range(0, rows, step):
                end = min(start + step, rows)
                x = _input[start:end].float()
                y = target[start:end]
                logits = x @ w32.t()
                if bias is not None:
                    logits += bias.float()
                grad = torch.softmax(logits, dim=-1)
                del logits
                valid = y != ctx.ignore_index
                safe = torch.where(valid, y, torch.zeros_like(y))
                grad.scatter_add_(1, safe.unsqueeze(1), torch.full_like(grad[:, :1], -1.0))
                grad.mul_((go[start:end] * valid.float()).unsqueeze(1))
                if grad_input is not None:
                    grad_input[start:end] = (grad @ w32).to(_input.dtype)
                if grad_weight is not None:
                    grad_weight.addmm_(grad.t(), x)
                if grad_bias is not None:
                    grad_bias += grad.sum(dim=0)
            return (
                None,
                grad_input,
                grad_weight.to(weight.dtype) if grad_weight is not None else None,
                grad_bias.to(bias.dtype) if grad_bias is not None else None,
                None,
                None,
            )

    return RowBroadcastFLCE


def _unsupported(bound: dict) -> str | None:
    if bound.get("ce_weight") is not None:
        return "ce_weight"
    if bound.get("lse_square_scale") not in (None, 0, 0.0):
        return "lse_square_scale (z-loss)"
    if bound.get("label_smoothing") not in (None, 0, 0.0):
        return "label_smoothing"
    if bound.get("softcap") is not None:
        return "softcap"
    if bound.get("use_token_scaling"):
        return "use_token_scaling"
    return None


def apply(module) -> None:
    import torch

    cls = module.LigerFusedLinearCrossEntropyFunction
    if _ORIGINAL in cls.__dict__:
        return
    original_apply = cls.apply
    signature = inspect.signature(cls.forward)
    row_broadcast = _make_function()

    def patched_apply(*args, **kwargs):
        bound = signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        tensors = [values.get("_input"), values.get("weight"), values.get("bias")]
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in tensors
        )
        if values.get("reduction") != "none" or not needs_grad:
            return original_apply(*args, **kwargs)
        reason = _unsupported(values)
        if reason is not None:
            if reason not in _warned:
                _warned.add(reason)
                warnings.warn(
                    f"patchlane liger_flce_reduction_none: reduction='none' with {reason} is not "
                    "covered by the shim; calling upstream (its backward is wrong for non-uniform "
                    "grad_output)",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return original_apply(*args, **kwargs)
        with torch.no_grad():
            outputs = original_apply(*args, **kwargs)
        single = not isinstance(outputs, tuple)
        loss = outputs if single else outputs[0]
        loss = row_broadcast.apply(
            loss,
            values["_input"],
            values["weight"],
            values.get("bias"),
            values["target"],
            values["ignore_index"],
        )
        return loss if single else (loss, *outputs[1:])

    patched_apply.__doc__ = getattr(original_apply, "__doc__", None)
    setattr(cls, _ORIGINAL, original_apply)
    cls.apply = staticmethod(patched_apply)
