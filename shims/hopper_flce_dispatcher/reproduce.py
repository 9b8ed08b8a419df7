"""Reproducer for hopper_flce_dispatcher (a real H100/H200, or a CPU with a faked capability).

Needs a megatron-core built from a Megatron-LM revision that has
megatron/core/fusions/fused_linear_cross_entropy.py: the dev branch or the 26.04-alpha.rc1/rc2
tags (no PyPI release up to 0.19.2 has it). Constructs the real Platform with compute capability
9.x (faked through torch.cuda on hosts without a Hopper GPU, said so in the output).

without: BUG_REPRODUCED on ValueError("Unsupported architecture: 9"); FIX_VALIDATED when upstream
         dispatches cc 9 (NVIDIA/Megatron-LM#3345 adds a Hopper entry and the branch).
with:    FIX_VALIDATED when the platform binds an entry for cc 9 and
         megatron.core.fusions.fused_linear_cross_entropy.linear_cross_entropy, forward and
         backward, matches eager PyTorch (fp32 logits -> F.cross_entropy) for reduction "none"
         (with a non-uniform upstream gradient) and "mean", with ignore_index labels present.
SKIPPED where the installed megatron-core has no fused_linear_cross_entropy.
"""

from __future__ import annotations

import contextlib
from unittest import mock

from shims import reproducer

SHIM = "hopper_flce_dispatcher"
TOKENS, DIM, VOCAB, IGNORE = 1024, 512, 8192, -100


def _numerics(torch, flce, device) -> bool:
    """linear_cross_entropy vs eager PyTorch, forward and backward; prints the worst differences."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    gen = torch.Generator(device="cpu").manual_seed(0)
    hidden = (torch.randn(TOKENS, DIM, generator=gen) * 0.5).to(device, dtype)
    weight = (torch.randn(VOCAB, DIM, generator=gen) * 0.05).to(device, dtype)
    labels = torch.randint(0, VOCAB, (TOKENS,), generator=gen)
    labels[torch.rand(TOKENS, generator=gen) < 0.2] = IGNORE
    labels = labels.to(device)
    # a loss mask: not uniform
    upstream = torch.rand(TOKENS, generator=gen).to(device)
    ok = True
    for reduction in ("none", "mean"):
        h1, w1 = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
        loss = flce.linear_cross_entropy(h1, w1, labels, None, reduction, IGNORE, False)
        (loss * upstream).sum().backward() if reduction == "none" else loss.backward()
        h2, w2 = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
        logits = (h2 @ w2.t()).float()
        ref = torch.nn.functional.cross_entropy(
            logits, labels, reduction=reduction, ignore_index=IGNORE
        )
        (ref * upstream).sum().backward() if reduction == "none" else ref.backward()
        for name, got, want in (
            ("loss", loss, ref),
            ("dhidden", h1.grad, h2.grad),
            ("dweight", w1.grad, w2.grad),
        ):
            got, want = got.float(), want.float()
            diff = (got - want).abs().max().item()
            bound = (
                2e-2 * max(want.abs().max().item(), 1e-6)
                if dtype == torch.bfloat16
                else 1e-4 * max(want.abs().max().item(), 1e-6)
            )
            close = got.shape == want.shape and bool(torch.isfinite(got).all()) and diff <= bound
            print(
                f"#   reduction={reduction:4s} {name:8s} {tuple(got.shape)!s:14s} max|diff| "
                f"{diff:.3e} "
                f"(bound {bound:.3e}) {'ok' if close else 'MISMATCH'}"
            )
            ok = ok and close
    return ok


def check(with_shim: bool) -> str:
    torch = reproducer.require("torch")
    flce = reproducer.require(
        "megatron.core.fusions.fused_linear_cross_entropy",
        "megatron-core",
        hint="it exists only on Megatron-LM dev / 26.04-alpha.rc1,rc2: build megatron-core from "
        "one of those revisions",
    )

    real_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
    fake = contextlib.ExitStack()
    if not real_hopper:
        fake.enter_context(mock.patch.object(torch.cuda, "is_available", return_value=True))
        fake.enter_context(mock.patch.object(torch.cuda, "current_device", return_value=0))
        fake.enter_context(
            mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0))
        )
    device = "cuda" if real_hopper else "cpu"
    print(
        f"# compute capability: "
        f"{'real ' + torch.cuda.get_device_name() if real_hopper else 'faked'} 9.x"
    )
    flce.Platform._instance = None
    getattr(flce._get_platform, "cache_clear", lambda: None)()
    with fake:
        try:
            platform = flce._get_platform()
        except ValueError as exc:
            print(f"# Platform() raised: ValueError: {exc}")
            if "Unsupported architecture" in str(exc):
                return reproducer.BUG_REPRODUCED
            raise
        except AttributeError as exc:
            if "hopper" not in str(exc):
                raise
            # Upstream dispatches cc 9 (NVIDIA/Megatron-LM#3345), but its entry module defines
            # nothing when its CuTe DSL imports fail.
            raise reproducer.Skip(
                f"upstream dispatches cc 9 to its Hopper entry, unusable here ({exc}): install "
                f"nvidia-cutlass-dsl"
            ) from None
        where = getattr(platform, "entry_name", None) or getattr(
            platform.forward_func, "__module__", "?"
        )
        print(f"# cc 9 dispatched to: {where}")
        if not with_shim:
            # upstream dispatches cc 9 itself
            return reproducer.FIX_VALIDATED
        try:
            ok = _numerics(torch, flce, device)
        except ImportError as exc:
            raise reproducer.Skip(f"the cc 9 entry is not runnable here: {exc}") from None
    return reproducer.FIX_VALIDATED if ok else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
