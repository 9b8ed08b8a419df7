"""Reproducer for mamba3_fp32_float16module (CPU).

Wraps a module that carries the Mamba-3 fp32 parameter contract (A_log, D, dt_bias in fp32, next
to ordinary bf16-able weights) in megatron-core's real Float16Module with bf16=True.
mamba_ssm's Mamba3 cannot be built on a CPU host, so the wrapped module is a stand-in with the
same parameter names and dtypes; the code under test is Float16Module itself.

without: BUG_REPRODUCED when Float16Module turns the fp32-contract parameters into bf16.
with:    FIX_VALIDATED when they stay fp32 and bitwise equal to their pre-wrap values while the
         ordinary weights are bf16 (the rest of the cast is unchanged).
"""

from __future__ import annotations

from shims import reproducer

SHIM = "mamba3_fp32_float16module"
FP32_PARAMS = ("A_log", "D", "dt_bias")


def check(with_shim: bool) -> str:
    torch = reproducer.require("torch")
    transformer_module = reproducer.require("megatron.core.transformer.module", "megatron-core")
    transformer_config = reproducer.require(
        "megatron.core.transformer.transformer_config", "megatron-core"
    )

    class MambaContractStandIn(torch.nn.Module):
        """Stand-in for a Mamba-3 mixer: fp32 A_log / D / dt_bias next to bf16-able projections."""

        def __init__(self, heads: int = 8, width: int = 64) -> None:
            super().__init__()
            self.in_proj = torch.nn.Linear(width, 2 * width, bias=False)
            self.out_proj = torch.nn.Linear(width, width, bias=False)
            gen = torch.Generator().manual_seed(0)
            a = torch.empty(heads).uniform_(1, 16, generator=gen)
            # Mamba keeps A_log in fp32
            self.A_log = torch.nn.Parameter(torch.log(a))
            self.D = torch.nn.Parameter(torch.rand(heads, generator=gen) + 0.5)
            self.dt_bias = torch.nn.Parameter(torch.randn(heads, generator=gen) * 1e-3)

    torch.manual_seed(0)
    model = torch.nn.Sequential(MambaContractStandIn())
    before = {name: getattr(model[0], name).detach().clone() for name in FP32_PARAMS}
    config = transformer_config.TransformerConfig(
        num_layers=1, hidden_size=64, num_attention_heads=8, bf16=True
    )
    wrapped = transformer_module.Float16Module(config, model)
    mixer = wrapped.module[0]

    broken = []
    for name in FP32_PARAMS:
        param = getattr(mixer, name)
        exact = param.dtype == torch.float32 and torch.equal(param.detach(), before[name])
        drift = (param.detach().float() - before[name]).abs().max().item()
        print(f"# {name}: dtype={param.dtype} max |after - before| = {drift:.3e}")
        if not exact:
            broken.append(name)
    a_true = -torch.exp(before["A_log"])
    a_used = -torch.exp(mixer.A_log.detach().float())
    print(
        f"# decay A = -exp(A_log): max relative error "
        f"{((a_used - a_true).abs() / a_true.abs()).max().item():.3e}"
    )
    print(f"# in_proj.weight dtype={mixer.in_proj.weight.dtype}")
    if mixer.in_proj.weight.dtype != torch.bfloat16:
        raise RuntimeError("Float16Module did not cast the ordinary weights to bf16")
    if broken:
        print(f"# fp32-contract parameters cast by Float16Module: {', '.join(broken)}")
        return reproducer.BUG_REPRODUCED
    return reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
