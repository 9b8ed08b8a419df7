"""Reproducer for liger_flce_reduction_none (CUDA: Liger's kernels are Triton).

A masked per-token loss, (loss_vec * mask).sum().backward(), through Liger's fused linear
cross-entropy with reduction="none", against eager PyTorch (x @ W.T, F.cross_entropy). mask[0] is
1 and about half of the other tokens are masked, so a backward that scales every row by
grad_output[0] gives masked tokens full gradients.

without: BUG_REPRODUCED when Liger's gradients differ from eager beyond tolerance; FIX_VALIDATED
         when they match (liger-kernel >= 0.8.2).
with:    FIX_VALIDATED when the shimmed gradients match eager.
"""

from __future__ import annotations

from shims import reproducer

SHIM = "liger_flce_reduction_none"
TOKENS, HIDDEN, VOCAB = 1024, 256, 4096
# relative to max |eager grad|; fp32 inputs, TF32-level kernel noise is ~1e-3
TOLERANCE = 2e-2


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="8.0")
    import torch
    from torch.nn import functional

    liger = reproducer.require("liger_kernel.ops.fused_linear_cross_entropy", "liger-kernel")

    gen = torch.Generator(device="cpu").manual_seed(0)
    x0 = (torch.randn(TOKENS, HIDDEN, generator=gen) * 0.5).cuda()
    w0 = (torch.randn(VOCAB, HIDDEN, generator=gen) * 0.05).cuda()
    target = torch.randint(0, VOCAB, (TOKENS,), generator=gen).cuda()
    # some ignore_index rows as well
    target[5::17] = -100
    mask = (torch.rand(TOKENS, generator=gen) > 0.5).float().cuda()
    mask[0] = 1.0

    # eager reference
    x_ref = x0.clone().requires_grad_(True)
    w_ref = w0.clone().requires_grad_(True)
    loss_ref = functional.cross_entropy(
        x_ref @ w_ref.t(), target, reduction="none", ignore_index=-100
    )
    (loss_ref * mask).sum().backward()

    # Liger, reduction="none": (_input, weight, target, bias, ce_weight, ignore_index,
    # lse_square_scale, label_smoothing, reduction)
    x = x0.clone().requires_grad_(True)
    w = w0.clone().requires_grad_(True)
    out = liger.LigerFusedLinearCrossEntropyFunction.apply(
        x, w, target, None, None, -100, 0.0, 0.0, "none"
    )
    loss = out[0] if isinstance(out, tuple) else out
    (loss * mask).sum().backward()
    torch.cuda.synchronize()

    forward_err = (loss.detach() - loss_ref.detach()).abs().max().item()
    gx = (x.grad - x_ref.grad).abs().max().item() / x_ref.grad.abs().max().item()
    gw = (w.grad - w_ref.grad).abs().max().item() / w_ref.grad.abs().max().item()
    masked = mask == 0
    leak = x.grad[masked].abs().max().item()
    print(f"# tokens={TOKENS} hidden={HIDDEN} vocab={VOCAB} masked={int(masked.sum())} dtype=fp32")
    print(f"# forward max |liger - eager| per-token loss = {forward_err:.3e}")
    print(f"# grad_input  max rel err = {gx:.3e}")
    print(f"# grad_weight max rel err = {gw:.3e}")
    print(f"# largest grad_input on a masked token (should be 0) = {leak:.3e}")
    if forward_err > 1e-2:
        raise RuntimeError(f"forward loss differs from eager by {forward_err}")
    if gx > TOLERANCE or gw > TOLERANCE:
        return reproducer.BUG_REPRODUCED
    return reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "triton", "liger-kernel"])
