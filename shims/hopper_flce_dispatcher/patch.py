"""hopper_flce_dispatcher: give compute capability 9.x a working LinearCrossEntropy entry.

Megatron-LM dev (and the 26.04-alpha.rc1/rc2 tags: the same file) wires only cc 10 (the Blackwell
CuTe DSL entry) and raises ``ValueError("Unsupported architecture: 9")`` on H100/H200. There is no
Hopper entry on those revisions: ``linear_cross_entropy/hopper/entry.py`` exists only on the open
PR NVIDIA/Megatron-LM#3345, which also adds the cc 9 branch. So on cc 9.x the gate binds, in order:

1. ``linear_cross_entropy.hopper.entry`` if it is importable and defines forward/backward (its
   module body is inside ``try: import cutlass ... except ImportError``: without the CuTe DSL it
   imports but defines nothing);
2. else :data:`torch_entry` below: the same forward/backward contract in plain PyTorch, chunked over
   tokens so the fp32 logits of one chunk (not the whole [tokens, vocab]) are live at a time.
   Data parallel only (``tp_group`` None or of size 1); TP/SP raise NotImplementedError.

Every other capability goes through upstream unchanged.
"""

from __future__ import annotations

import functools
import importlib
import types

from shims.shape import unknown_shape, unpatched_source

#: Platform.__init__ of Megatron-LM dev d48bd6be0a = 26.04-alpha.rc1 85bced0ae6 = rc2 99a108127d
#: (one blob, b533fef7): cc[0] == 10 or ValueError.
KNOWN_SHAPES = {
    "ebd7bb2095ae907f": "Megatron-LM dev / 26.04-alpha.rc1,rc2 "
    "fused_linear_cross_entropy.Platform.__init__ (Blackwell only)"
}
#: fp32 logits elements per chunk in the torch entry (256 Mi elements = 1 GiB).
CHUNK_ELEMENTS = 1 << 28
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
    source = unpatched_source(module.Platform.__dict__["__init__"], _PATCHED)
    if source is None or "hopper" in source or "cc[0] == 9" in source:
        return None
    return (
        "Platform.__init__ wires only cc 10 (Blackwell); cc 9 raises 'Unsupported architecture: 9'"
    )


# ---------------------------------------------------------------------------------------------
# The torch entry: forward/backward with the contract of linear_cross_entropy.<arch>.entry


def _check_dp(tp_group) -> None:
    import torch.distributed as dist

    if tp_group is not None and dist.get_world_size(tp_group) > 1:
        raise NotImplementedError(
            "patchlane hopper_flce_dispatcher: the torch LinearCrossEntropy entry covers data "
            "parallel only (tp_group of size 1); install the CuTe DSL Hopper entry for TP/SP"
        )


def _chunks(num_tokens: int, vocab: int):
    step = max(1, CHUNK_ELEMENTS // max(vocab, 1))
    for start in range(0, num_tokens, step):
        yield start, min(start + step, num_tokens)


def _forward(
    hidden,
    weight,
    labels,
    tp_group=None,
    reduction="mean",
    ignore_index=-100,
    sequence_parallel=False,
):
    """(logprobs, maximum, accumulate, num_valid_tokens, tp_rank, tp_world_size, global_hidden).

    logprobs is the cross-entropy loss, fp32: [tokens] for reduction "none" (0 where ignored),
    a 0-d tensor for "sum" / "mean" (mean over the non-ignored tokens).
    """
    import torch

    _check_dp(tp_group)
    hidden_view = hidden.view(-1, hidden.shape[-1])
    labels_view = labels.view(-1)
    num_tokens, vocab = hidden_view.shape[0], weight.shape[0]
    maximum = torch.empty(num_tokens, device=hidden.device, dtype=torch.float32)
    accumulate = torch.empty_like(maximum)
    losses = torch.empty_like(maximum)
    valid = labels_view != ignore_index
    for start, end in _chunks(num_tokens, vocab):
        logits = torch.matmul(hidden_view[start:end], weight.t()).float()
        chunk_max = logits.max(dim=-1).values
        chunk_acc = (logits - chunk_max.unsqueeze(-1)).exp_().sum(dim=-1)
        target = labels_view[start:end].clamp(0, vocab - 1).unsqueeze(-1)
        picked = logits.gather(-1, target).squeeze(-1)
        maximum[start:end], accumulate[start:end] = chunk_max, chunk_acc
        losses[start:end] = torch.where(valid[start:end], chunk_max + chunk_acc.log() - picked, 0.0)
    num_valid_tokens = valid.sum()
    if reduction == "none":
        logprobs = losses
    elif reduction == "sum":
        logprobs = losses.sum()
    elif reduction == "mean":
        logprobs = losses.sum() / num_valid_tokens.clamp_min(1)
    else:
        raise ValueError(f"unsupported reduction {reduction!r}")
    return logprobs, maximum, accumulate, num_valid_tokens, 0, 1, hidden


def _backward(
    dlogprobs,
    global_hidden,
    weight,
    labels,
    maximum,
    accumulate,
    num_valid_tokens,
    reduction="mean",
    ignore_index=-100,
    tp_group=None,
    tp_rank=0,
    tp_world_size=1,
    sequence_parallel=False,
):
    """(d_hidden, d_weight): softmax minus one-hot, scaled by the incoming gradient per token."""
    import torch

    _check_dp(tp_group)
    hidden_view = global_hidden.view(-1, global_hidden.shape[-1])
    labels_view = labels.view(-1)
    num_tokens, vocab = hidden_view.shape[0], weight.shape[0]
    valid = (labels_view != ignore_index).float()
    if reduction == "none":
        scale = dlogprobs.view(-1).float() * valid
    elif reduction == "sum":
        scale = dlogprobs.float().reshape(()) * valid
    else:
        scale = dlogprobs.float().reshape(()) / num_valid_tokens.clamp_min(1) * valid
    d_hidden = torch.empty(hidden_view.shape, device=hidden_view.device, dtype=torch.float32)
    d_weight = torch.zeros(weight.shape, device=weight.device, dtype=torch.float32)
    for start, end in _chunks(num_tokens, vocab):
        logits = torch.matmul(hidden_view[start:end], weight.t()).float()
        probs = (logits - maximum[start:end].unsqueeze(-1)).exp_() / accumulate[
            start:end
        ].unsqueeze(-1)
        target = labels_view[start:end].clamp(0, vocab - 1).unsqueeze(-1)
        probs.scatter_add_(-1, target, -valid[start:end].unsqueeze(-1))
        d_logits = probs * scale[start:end].unsqueeze(-1)
        d_hidden[start:end] = d_logits @ weight.float()
        d_weight += d_logits.t() @ hidden_view[start:end].float()
    return d_hidden.view(global_hidden.shape).type_as(global_hidden), d_weight.type_as(weight)


torch_entry = types.SimpleNamespace(
    forward=_forward, backward=_backward, __name__="patchlane torch entry"
)


def hopper_entry(package: str):
    """The upstream Hopper entry if it is importable and complete, else :data:`torch_entry`."""
    try:
        entry = importlib.import_module(f"{package}.linear_cross_entropy.hopper.entry")
    except ImportError:
        return torch_entry
    if callable(getattr(entry, "forward", None)) and callable(getattr(entry, "backward", None)):
        return entry
    # present, but its CuTe DSL imports failed: it defines no entry points
    return torch_entry


def apply(module) -> None:
    import torch

    platform = module.Platform
    original = platform.__dict__["__init__"]
    if getattr(original, _PATCHED, False):
        return
    package = module.__name__.rpartition(".")[0]

    # functools.wraps names it __init__, as the method it replaces
    @functools.wraps(original)
    def patched_init(self) -> None:
        if getattr(self, "_initialized", False):
            return
        if torch.cuda.is_available():
            major, _ = torch.cuda.get_device_capability(torch.cuda.current_device())
            if major == 9:
                entry = hopper_entry(package)
                self.forward_func = entry.forward
                self.backward_func = entry.backward
                self.entry_name = getattr(entry, "__name__", repr(entry))
                self._initialized = True
                return
        original(self)

    setattr(patched_init, _PATCHED, True)
    platform.__init__ = patched_init
