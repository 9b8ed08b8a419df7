"""The one allow-list of what patchlane's child processes inherit from its environment.

Lane code (reproducers, the lane interpreter being inspected) gets only what a program needs to
run on this host: where things are (``PATH``, ``HOME``, temp and cache folders), the locale, and
the runtime knobs of the GPU stack (``CUDA_*``, ``NCCL_*``, ``TORCH_*``, ``TRITON_*``, ``TL_*``…),
plus patchlane's own non-secret settings. uv gets the same plus its own ``UV_*`` configuration,
proxies and certificates; the index credentials it may need (``UV_INDEX_<NAME>_PASSWORD``) are
handed to it outside its environment (:mod:`retire.core.uvauth`). git, and the hooks it runs, get
the caller's environment without any secret-named variable (:func:`for_tool`).

A host adds names with ``PATCHLANE_PASS_ENV="NAME …"``. Whatever the list allows, a variable whose
name looks like a secret (``*TOKEN*``, ``*KEY*``,
``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``AUTH*``: :func:`retire.core.secrets.looks_secret`)
reaches no child process as a variable.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import uuid
from collections.abc import Iterator, Mapping

from retire.core.secrets import looks_secret
from retire.core.uvauth import CREDENTIAL

__all__ = [
    "RUN_TOKEN",
    "RUN_TOKEN_ENV",
    "for_lane",
    "for_reproducer",
    "for_tool",
    "for_uv",
    "lane_allows",
    "secrets_for_push",
    "uv_allows",
    "visible_devices",
]

#: Every process patchlane starts for a lane (reproducers, uv) carries
#: ``RUN_TOKEN_ENV=<RUN_TOKEN>.<n>``,
#: and so do their descendants: how an interrupted run finds them all (retire/runs/reaper.py).
RUN_TOKEN_ENV = "PATCHLANE_RUN_TOKEN"
RUN_TOKEN = uuid.uuid4().hex

_EXACT = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "TERM",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "CI",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "LDFLAGS",
        "MAKEFLAGS",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_RUNTIME_DIR",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "SOURCE_DATE_EPOCH",
        "CONDA_PREFIX",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "MAX_JOBS",
        "CUDACXX",
        "CUDAHOSTCXX",
        "PKG_CONFIG_PATH",
        "CARGO_HOME",
        "RUSTUP_HOME",
    }
)
_PREFIXES = (
    "LC_",
    "CUDA_",
    "CUDNN_",
    "CUBLAS",
    "CUTLASS_",
    "NVIDIA_",
    "NV_",
    "NVTE_",
    "NCCL_",
    "NVSHMEM_",
    "GLOO_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "TORCHDYNAMO_",
    "PYTORCH_",
    "TRITON_",
    "TL_",
    "TILELANG_",
    "HF_",
    "TRANSFORMERS_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "PYTHON",
    "PYENV_",
    "PATCHLANE_",
    "SHIMS_",
    "COVERAGE_",
    # extension builds and JIT compilers (torch cpp_extension, TileLang/TVM, mamba, TE, flash-attn)
    "CMAKE_",
    "NINJA_",
    "CCACHE_",
    "NVCC_",
    "TVM_",
    "MAMBA_",
    "CAUSAL_CONV1D_",
    "FLASH_ATTENTION_",
    "TE_",
)
#: Extra variable names (space-separated) a host passes to lane code; secret-named ones still never
#: pass.
PASS_ENV = "PATCHLANE_PASS_ENV"
# uv also reads its own settings, proxies and certificate bundles.
_UV_EXACT = frozenset(
    {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "NETRC",
        "XDG_CONFIG_DIRS",
        "XDG_DATA_DIRS",
        "XDG_BIN_HOME",
    }
)
_UV_PREFIXES = ("UV_",)


#: The GPUs the lane running on this thread was given (``CUDA_VISIBLE_DEVICES``; None: leave the
#: variable as it is). Every child a lane starts — uv, its interpreter, reproducers, the launcher
#: and its forks — gets it, whatever the lane's own env says (retire/runs/packing.py).
_DEVICES: contextvars.ContextVar[str | None] = contextvars.ContextVar("devices", default=None)


@contextlib.contextmanager
def visible_devices(ids: str | None) -> Iterator[None]:
    """Children started on this thread inside the block see only the GPUs ``ids`` names ("0,1";
    "": none)."""
    token = _DEVICES.set(ids)
    try:
        yield
    finally:
        _DEVICES.reset(token)


def given_devices() -> str | None:
    """The GPUs the lane (or candidate) running on this thread was given, as its children see
    them in ``CUDA_VISIBLE_DEVICES`` ("0,1"; "": none), or None where none were set."""
    return _DEVICES.get()


def _with_devices(env: dict[str, str]) -> dict[str, str]:
    ids = _DEVICES.get()
    if ids is not None:
        env["CUDA_VISIBLE_DEVICES"] = ids
    return env


def lane_allows(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether lane code may inherit the variable ``name`` (``extra``: names the host passes
    too)."""
    if looks_secret(name):
        return False
    return name in _EXACT or name in extra or name.upper().startswith(_PREFIXES)


def _extra(env: Mapping[str, str]) -> frozenset[str]:
    return frozenset(env.get(PASS_ENV, "").split())


def uv_allows(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether uv may inherit the variable ``name`` (never a secret: its index credentials reach
    it through :mod:`retire.core.uvauth`)."""
    if looks_secret(name) or CREDENTIAL.fullmatch(name):
        return False
    return lane_allows(name, extra) or name in _UV_EXACT or name.startswith(_UV_PREFIXES)


def for_lane(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of ``environ`` (default: this process's) that lane code may see."""
    env = os.environ if environ is None else environ
    extra = _extra(env)
    return _with_devices({name: value for name, value in env.items() if lane_allows(name, extra)})


def for_uv(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of ``environ`` (default: this process's) that uv may see."""
    env = os.environ if environ is None else environ
    extra = _extra(env)
    return _with_devices({name: value for name, value in env.items() if uv_allows(name, extra)})


def for_tool(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a tool of the host's (git, and the hooks a repository configures for it) starts with:
    ``environ`` (default: this process's) without any secret-named variable."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items() if not looks_secret(name)}


def secrets_for_push(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secret-named variables of ``environ`` (default: this process's): what git's credential
    helper may need for the one command that authenticates, a push (run without hooks)."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items() if looks_secret(name)}


def for_reproducer(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a reproducer starts with: ``env`` as built by its caller (the lane's variables over
    :func:`for_lane`), else :func:`for_lane` of this process; secret-named variables dropped either
    way, so not even a caller's mistake hands lane code a token. Every launcher calls this."""
    if env is None:
        return for_lane()
    return _with_devices({name: value for name, value in env.items() if not looks_secret(name)})
