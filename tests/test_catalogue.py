"""The shop's real shim catalogue: manifests, patch contracts, reproducers, generated docs.

Fast tests need only the standard library and ``packaging``. Tests that run a reproducer with
the real upstream packages are marked ``slow`` and skip unless torch / megatron-core are
importable (the CI lane ``cpu`` has them).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from shims.manifest import discover, load_manifest

ROOT = Path(__file__).resolve().parent.parent
SHIMS = ROOT / "shims"

CATALOGUE = {
    "compile_nccl_policy": "env-constraint",
    "dsa_index_mask_host_sync": "source-patch",
    "dsa_indexer_memory": "source-patch",
    "hopper_flce_dispatcher": "compat-gate",
    "liger_flce_reduction_none": "wrapper",
    "mamba3_fp32_float16module": "wrapper",
    "mamba3_mimo_gqa_backward": "source-patch",
    "sparse_mla_dim_guard": "source-patch",
    "sparse_mla_fp8_dispatch": "compat-gate",
    "tilelang_tma_lowering": "env-constraint",
}


def _catalogue():
    return {m.id: m for m in discover(SHIMS) if m.id in CATALOGUE}


def _patch(shim_id: str):
    return importlib.import_module(f"shims.{shim_id}.patch")


# ------------------------------------------------------------------------------------------
# Manifests and files


def test_every_catalogue_manifest_loads_and_validates():
    found = _catalogue()
    assert sorted(found) == sorted(CATALOGUE)
    for shim_id, manifest in found.items():
        assert manifest.fix_class == CATALOGUE[shim_id]
        assert manifest.retirement.conditions, shim_id
        assert manifest.explanation.strip() and manifest.numerics.strip()
        assert manifest.reproducer_path.is_file(), shim_id
        assert (manifest.directory / "__init__.py").is_file(), shim_id


def test_upstream_links_are_real_project_links():
    for manifest in _catalogue().values():
        for link in manifest.upstream.links:
            assert link.url.startswith("https://github.com/"), link.url


def test_patches_define_the_contract():
    for shim_id, manifest in _catalogue().items():
        if not manifest.has_patch:
            assert manifest.fix_class == "env-constraint", shim_id
            continue
        patch = _patch(shim_id)
        for hook in ("check_shape", "probe", "apply"):
            assert callable(getattr(patch, hook, None)), f"{shim_id}.patch.{hook}"


def test_env_constraint_shims_expose_their_variables():
    found = _catalogue()
    assert found["compile_nccl_policy"].env_vars == {
        "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM": "0",
        "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT": "7200",
        "TORCH_NCCL_ENABLE_MONITORING": "0",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "7200",
    }
    assert found["tilelang_tma_lowering"].env_vars == {"TL_DISABLE_TMA_LOWER": "1"}


# ------------------------------------------------------------------------------------------
# check_shape notices a changed upstream (fake modules with a different function)


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _changed_compute_index_scores(q, weights, k):
    # some other implementation
    return (q.float() * 2).sum(dim=2)


def _changed_scatter(index_mask, topk_indices, *, seq_chunk_size=256):
    index_mask.zero_()


class _ChangedFloat16Module:
    def __init__(self, config, module):
        # no longer casts
        self.module = module


class _ChangedPlatform:
    def __init__(self):
        self.forward_func = self.backward_func = None


class _ChangedLigerFunction:
    @staticmethod
    def forward(ctx, _input, weight, target, options=None):
        return _input


def _changed_mamba_bwd(dout, q, k, v, extra=None):
    return q, k


def _changed_sparse_mla(query, key, indices):
    return None


def _changed_normalize(configs=None):
    return dict(configs or {})


CHANGED = {
    "dsa_indexer_memory": lambda: _module(
        "dsa", _compute_index_scores=_changed_compute_index_scores
    ),
    "dsa_index_mask_host_sync": lambda: _module(
        "dsa", _scatter_topk_into_index_mask=_changed_scatter
    ),
    "mamba3_fp32_float16module": lambda: _module("module", Float16Module=_ChangedFloat16Module),
    "hopper_flce_dispatcher": lambda: _module("flce", Platform=_ChangedPlatform),
    "liger_flce_reduction_none": lambda: _module(
        "flce",
        LigerFusedLinearCrossEntropyFunction=_ChangedLigerFunction,
        fused_linear_cross_entropy_forward=_changed_normalize,
    ),
    "mamba3_mimo_gqa_backward": lambda: _module("bwd", mamba_mimo_bwd_combined=_changed_mamba_bwd),
    "sparse_mla_dim_guard": lambda: _module(
        "fake.ops.tilelang_dsa", fused_sparse_mla_absorbed=_changed_sparse_mla
    ),
    "sparse_mla_fp8_dispatch": lambda: _module(
        "tilelang_dsa", fused_sparse_mla_absorbed=_changed_sparse_mla
    ),
    "tilelang_tma_lowering": lambda: _module(
        "pass_config", normalize_pass_configs=_changed_normalize
    ),
}


@pytest.mark.parametrize("shim_id", sorted(CHANGED))
def test_check_shape_detects_a_changed_target(shim_id):
    reason = _patch(shim_id).check_shape(CHANGED[shim_id]())
    assert isinstance(reason, str) and reason.strip(), f"{shim_id} accepted a changed target"


@pytest.mark.parametrize("shim_id", sorted(CHANGED))
def test_check_shape_detects_a_missing_target(shim_id):
    if shim_id == "dsa_index_mask_host_sync":
        pytest.skip(
            "absence of the helper means 'nothing to patch' here (0.16-0.18, 0.19+), by design"
        )
    assert _patch(shim_id).check_shape(_module("empty")) is not None


def test_fingerprint_is_stable_and_sensitive():
    from shims.shape import fingerprint, unknown_shape

    first = fingerprint(_changed_compute_index_scores)
    assert first == fingerprint(_changed_compute_index_scores)
    assert first != fingerprint(_changed_scatter)
    assert unknown_shape(_changed_compute_index_scores, {first: "known"}, "f") is None
    assert "not a known shape" in unknown_shape(_changed_scatter, {first: "known"}, "f")


def test_changed_parameters_reads_the_leading_parameters():
    from shims.shape import changed_parameters

    def f(a, b, c=1):
        return a

    assert changed_parameters(f, ("a", "b"), "f") is None
    assert changed_parameters(f, ("a", "x"), "f") == "f parameters changed: ('a', 'b', 'c')"
    assert changed_parameters(f, ("a", "b", "c", "d"), "f") is not None


# ------------------------------------------------------------------------------------------
# Shim logic that needs only torch (no GPU, no upstream package)


def test_liger_row_broadcast_backward_matches_eager():
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional

    class FakeLiger(torch.autograd.Function):
        @staticmethod
        def forward(
            ctx,
            _input,
            weight,
            target,
            bias=None,
            ce_weight=None,
            ignore_index=-100,
            lse_square_scale=0.0,
            label_smoothing=0.0,
            reduction="mean",
            softcap=None,
            return_z_loss=False,
        ):
            logits = _input @ weight.t() + (bias if bias is not None else 0)
            return functional.cross_entropy(
                logits, target, reduction="none", ignore_index=ignore_index
            ), None

        @staticmethod
        # the upstream path must not be taken
        def backward(ctx, *grads):
            raise AssertionError("upstream backward used")

    patch = _patch("liger_flce_reduction_none")
    module = _module(
        "flce",
        LigerFusedLinearCrossEntropyFunction=FakeLiger,
        fused_linear_cross_entropy_forward=lambda reduction="mean": None,
    )
    assert patch.check_shape(module) is None and patch.probe(module) is not None
    patch.apply(module)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=gen, requires_grad=True)
    w = torch.randn(40, 8, generator=gen, requires_grad=True)
    b = torch.randn(40, generator=gen, requires_grad=True)
    y = torch.randint(0, 40, (96,), generator=gen)
    y[::5] = -100
    mask = (torch.rand(96, generator=gen) > 0.5).float()
    loss, _ = FakeLiger.apply(x, w, y, b, None, -100, 0.0, 0.0, "none")
    (loss * mask).sum().backward()
    x2, w2, b2 = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    (
        functional.cross_entropy(x2 @ w2.t() + b2, y, reduction="none", ignore_index=-100) * mask
    ).sum().backward()
    for got, want in ((x.grad, x2.grad), (w.grad, w2.grad), (b.grad, b2.grad)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_branchless_index_mask_scatter_is_correct_and_sync_free():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    patch = _patch("dsa_index_mask_host_sync")
    gen = torch.Generator().manual_seed(0)
    topk = torch.rand(2, 40, 64, generator=gen).topk(8, dim=-1).indices
    topk = topk.masked_fill(torch.rand(2, 40, 8, generator=gen) < 0.3, -1)
    mask = torch.full((2, 40, 64), float("-inf"))
    expected = mask.clone()
    for bi, qi, ti in (topk >= 0).nonzero().tolist():
        expected[bi, qi, topk[bi, qi, ti]] = 0.0
    syncs = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ in (
                "_local_scalar_dense",
                "is_nonzero",
                "item",
                "equal",
                "nonzero",
            ):
                syncs.append(func)
            return func(*args, **(kwargs or {}))

    with Count():
        patch.branchless_scatter_topk_into_index_mask(mask, topk, seq_chunk_size=16)
    assert syncs == []
    assert torch.equal(mask, expected)


def test_streamed_index_scores_match_einsum():
    torch = pytest.importorskip("torch")
    patch = _patch("dsa_indexer_memory")
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(32, 2, 8, 16, generator=gen).bfloat16()
    w = torch.randn(32, 2, 8, generator=gen).bfloat16()
    k = torch.randn(48, 2, 16, generator=gen).bfloat16()
    reference = (
        (torch.relu(torch.einsum("sbhd,tbd->sbht", q.float(), k.float())) * w.unsqueeze(-1))
        .sum(2)
        .transpose(0, 1)
    )
    torch.testing.assert_close(
        patch.streamed_index_scores(q, w, k), reference, rtol=1e-5, atol=1e-4
    )


def test_mamba_gqa_expand_then_reduce_is_the_group_sum():
    torch = pytest.importorskip("torch")
    patch = _patch("mamba3_mimo_gqa_backward")
    # [B, S, R, G, N]
    q = torch.randn(1, 3, 2, 2, 4)
    expanded = patch.expand_groups(q, heads=6)
    assert expanded.shape == (1, 3, 2, 6, 4)
    # heads 0..2 read group 0
    assert torch.equal(expanded[:, :, :, 0], expanded[:, :, :, 2])
    torch.testing.assert_close(patch.reduce_heads(expanded, groups=2), q * 3)


def test_fp8_gate_dequantizes_quantized_inputs():
    torch = pytest.importorskip("torch")
    patch = _patch("sparse_mla_fp8_dispatch")

    # the lineage name is what the gate keys on
    class QuantizedTensor:
        def __init__(self, value):
            self.value = value

        def dequantize(self):
            return self.value

    class Float8Tensor(QuantizedTensor):
        pass

    seen = {}

    def fused_sparse_mla_absorbed(query, key, topk_indices, softmax_scale, v_channels):
        seen["types"] = (type(query), type(key))
        return query

    module = _module("tilelang_dsa", fused_sparse_mla_absorbed=fused_sparse_mla_absorbed)
    assert patch.check_shape(module) is None and patch.probe(module) is not None
    patch.apply(module)
    value = torch.ones(2)
    with pytest.warns(RuntimeWarning, match="dequantized"):
        module.fused_sparse_mla_absorbed(Float8Tensor(value), value, None, 1.0, 512)
    assert seen["types"] == (torch.Tensor, torch.Tensor)


# ------------------------------------------------------------------------------------------
# Reproducers


def _run(shim_id: str, mode: str):
    from retire.runs.reproduce import run_reproducer

    return run_reproducer(
        load_manifest(SHIMS / shim_id / "manifest.toml"), mode, python=sys.executable, lane="test"
    )


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


GPU_SHIMS = (
    "liger_flce_reduction_none",
    "mamba3_mimo_gqa_backward",
    "sparse_mla_dim_guard",
    "sparse_mla_fp8_dispatch",
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["without", "with"])
@pytest.mark.parametrize("shim_id", GPU_SHIMS)
def test_gpu_reproducers_skip_cleanly_without_cuda(shim_id, mode):
    if _cuda_available():
        pytest.skip("CUDA host: covered by the device lane")
    record = _run(shim_id, mode)
    assert record.outcome == "skipped", record.output_tail
    assert record.exit_code == 77 and record.host.get("gpu") is None


def _megatron_version():
    from importlib import metadata

    from packaging.version import Version

    return Version(metadata.version("megatron-core"))


# (shim, mode) -> expected outcome on a CPU host with torch + megatron-core (0.16.1 .. 0.19.2)
def _expected_cpu(shim_id: str, mode: str) -> str:
    if shim_id == "dsa_indexer_memory":
        return "bug-reproduced" if mode == "without" else "memory-save-verified"
    if shim_id == "mamba3_fp32_float16module":
        return "bug-reproduced" if mode == "without" else "fix-validated"
    if shim_id == "dsa_index_mask_host_sync":
        from packaging.version import Version

        return "fix-validated" if _megatron_version() >= Version("0.19.0") else "skipped"
    if shim_id == "hopper_flce_dispatcher":
        # fused_linear_cross_entropy is on Megatron-LM main only
        return "skipped"
    raise KeyError(shim_id)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["without", "with"])
@pytest.mark.parametrize(
    "shim_id",
    [
        "dsa_indexer_memory",
        "mamba3_fp32_float16module",
        "dsa_index_mask_host_sync",
        "hopper_flce_dispatcher",
    ],
)
def test_cpu_reproducers_on_real_megatron_core(shim_id, mode):
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    if shim_id == "hopper_flce_dispatcher" and importlib.util.find_spec(
        "megatron.core.fusions.fused_linear_cross_entropy"
    ):
        pytest.skip("a Megatron-LM main checkout: expectations differ")
    record = _run(shim_id, mode)
    assert record.outcome == _expected_cpu(shim_id, mode), record.output_tail
    assert record.host.get("packages", {}).get("megatron-core")


@pytest.mark.slow
def test_compile_nccl_policy_in_effect_in_a_child_process():
    pytest.importorskip("torch")
    assert _run("compile_nccl_policy", "without").outcome == "skipped"
    record = _run("compile_nccl_policy", "with")
    assert record.outcome == "fix-validated", record.output_tail


@pytest.mark.slow
def test_tilelang_tma_policy_in_effect_or_skipped():
    record = _run("tilelang_tma_lowering", "with")
    expected = "fix-validated" if importlib.util.find_spec("tilelang") else "skipped"
    assert record.outcome == expected, record.output_tail


# ------------------------------------------------------------------------------------------
# The generated catalogue


def test_catalogue_doc_is_current_output_of_retire_catalogue():
    import subprocess
    import tempfile

    from retire.evidence.validation import load
    from retire.report.catalogue import build, render_markdown

    doc = (ROOT / "docs" / "catalogue.md").read_text(encoding="utf-8")
    manifest = ROOT / "validation" / "manifest.jsonl"
    if doc == render_markdown(build(discover(SHIMS), load(manifest))):
        return
    # A lane run (CI's `nox -s lane` before this session) appends this host's records to the
    # working copy; the committed document is generated from the committed records.
    committed = subprocess.run(
        ["git", "-C", str(ROOT), "show", "HEAD:validation/manifest.jsonl"],
        capture_output=True,
        text=True,
        check=False,
    )
    if committed.returncode != 0:
        pytest.fail(
            "docs/catalogue.md is stale: regenerate it with `patchlane catalogue -o "
            "docs/catalogue.md`"
        )
    with tempfile.TemporaryDirectory() as scratch:
        head = Path(scratch) / "manifest.jsonl"
        head.write_text(committed.stdout, encoding="utf-8")
        assert doc == render_markdown(build(discover(SHIMS), load(head))), (
            "docs/catalogue.md is stale: regenerate it with `patchlane catalogue -o "
            "docs/catalogue.md`"
        )


def test_catalogue_marks_unproven_shims_not_yet_run():
    from retire.evidence.validation import ValidationRecord
    from retire.report.catalogue import build, render_markdown

    skipped = ValidationRecord(
        shim="dsa_indexer_memory",
        mode="without",
        lane="x",
        host={"gpu": None},
        versions={},
        sentinel="SKIPPED",
        outcome="skipped",
        exit_code=77,
        duration_s=0.1,
        started_at="2026-01-01T00:00:00.000000+00:00",
    )
    rows = build(list(_catalogue().values()), [skipped])
    assert all(not row.proven for row in rows)
    assert render_markdown(rows).count("| **not yet run** |") == len(CATALOGUE)


def test_catalogue_reads_proof_from_records():
    from retire.evidence.validation import ValidationRecord
    from retire.report.catalogue import build

    def record(mode, outcome, sentinel):
        return ValidationRecord(
            shim="mamba3_fp32_float16module",
            mode=mode,
            lane="local-cpu",
            host={"gpu": None},
            versions={"megatron-core": "0.16.1"},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=0 if outcome != "bug-reproduced" else 10,
            duration_s=1.0,
            started_at=f"2026-01-01T00:00:0{len(mode)}.000000+00:00",
        )

    rows = {
        r.manifest.id: r
        for r in build(
            list(_catalogue().values()),
            [
                record("without", "bug-reproduced", "BUG_REPRODUCED"),
                record("with", "fix-validated", "FIX_VALIDATED"),
            ],
        )
    }
    proof = rows["mamba3_fp32_float16module"].proofs[0]
    assert (proof.lane, proof.host, proof.verdict) == ("local-cpu", "CPU", "bug and fix proven")


def test_catalogue_names_the_commit_a_package_was_built_from():
    from retire.evidence.validation import ValidationRecord
    from retire.report.catalogue import build, render_markdown

    commit = "d48bd6be0a85cc0d6d3cc71e8750cf357cc6bdb1"
    host = {
        "gpu": "NVIDIA H100 80GB HBM3",
        "hostname": "h100-1",
        "revisions": {"megatron-core": f"file:///srv/mirrors/NVIDIA/Megatron-LM.git@{commit}"},
    }
    runs = [
        ValidationRecord(
            shim="hopper_flce_dispatcher",
            mode=mode,
            lane="megatron-dev",
            host=host,
            versions={"megatron-core": "0.19.0+d48bd6b", "torch": "2.11.0"},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=code,
            duration_s=1.0,
            started_at="2026-11-25T10:00:00.000000+00:00",
        )
        for mode, sentinel, outcome, code in (
            ("without", "BUG_REPRODUCED", "bug-reproduced", 10),
            ("with", "FIX_VALIDATED", "fix-validated", 0),
        )
    ]
    text = render_markdown(build(list(_catalogue().values()), runs))
    assert "(megatron-core 0.19.0+d48bd6b from commit d48bd6be0a85, torch 2.11.0)" in text
    assert "bug and fix proven" in text
