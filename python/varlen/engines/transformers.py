"""transformers as an engine module: its vision attention, imported from
each band's wheel and run on the CPU, as the judge of faithful mode.

    python -m varlen.engines.differential --engine=transformers
        [--transformers=4.57.6,5.14.1,5.25.0] [--calls=N] [--backends=PROFILE,...]
        [--seed=S] [--save=DIR] [--json=FILE] [--cases=DIR]

Faithful mode's transformers profiles (docs/contract-transformers.md) model
three bands, each named by the release that stands for it (4.57.6, 5.14.1,
5.25.0); any other release from 4.53.1 on is judged by its band. For each band, profile (an `attn_implementation` name) and
generated call (varlen._core.generate_calls: both entries, every form of
cu_seqlens, max_seqlen and the interface keywords, packed and fused q, k,
v), faithful mode's prediction is compared with what that release's own
code does with the call:

* entry "layer": Qwen2_5_VLVisionAttention.forward(hidden_states,
  cu_seqlens=..., position_embeddings=..., **kwargs), the block the vision
  towers share, built from a small config whose `_attn_implementation` is
  the profile. Its projection is a stand-in that hands the layer the call's
  q, k and v as its [T, H, D] projections (a fused call's as views of one
  buffer), its rotary embedding a stand-in that makes q and k dense (the
  case's `rotary`) or leaves them as they are, and its output projection is
  the identity, so that the attention's output is what returns;
* entry "direct": the attention interface function itself, looked up as
  the layer looks it up (ALL_ATTENTION_FUNCTIONS[name]; eager_attention_forward
  for "eager"), called as fn(module, q, k, v, **kwargs) with q, k and v the
  [1, H, T, D] views the layer makes.

Everything between runs unchanged: the flash gate, the max the layer
computes or takes, integrations/flash_attention.py, modeling_flash_attention_utils'
branches and keyword processing (which inspects the kernel's signature),
sdpa_attention_forward and eager_attention_forward with real torch.

The kernels: `_lazy_imports` answers with functions carrying FlashAttention
2's (flash_attn 2.8, also the hub's kernels-community/flash-attn2), 3's
(hopper's flash_attn_interface) and 4's (flash_attn.cute) exact signatures,
FA2 for every name in 4.57.6 (whose `_lazy_imports` receives no name) and
the name's own in 5.x. Each records what it received, then runs the
kernel's door as its Python path reaches it: FA2 pads a head dim that is
not a multiple of 8 and calls its custom op (an int max_seqlen, so the
dispatcher converts a one-element tensor and refuses anything else), whose
kernel is mha_varlen_fwd's entry checks (kernel_entry.FlashEntry); FA3 calls
its fwd op (an optional int), whose kernel is mha_fwd's checks; FA4 is the
CuTe interface's entry checks (fa4_entry, on sm100). The dense
flash_attn_func (four-or-nothing's fallback, 4.57.6's per-image calls) runs
the same doors as one sequence per batch row. Tensors that stand for device
tensors are varlen.engines.device's: every host read of one (.item(),
.tolist(), an op's conversion of a tensor for an int argument) is a host
sync.

The wheel of each band (pinned by SHA-256) and its own dependencies, pinned
by exact version, are installed into build/python-env/transformers-<version>
by scripts/python-env; the files this judges are checked against the
wheel's own bytes before the band is imported. Bands are imported one at a
time: switching bands drops every module of the previous one.

What it does not cover: the towers themselves (the cu_seqlens builders from
grid_thw, the windows of Qwen2.5-VL), the real projections and rotary
embedding (stand-ins above), tracing and torch.compile, the paged branch,
the kernels' numerics (only sdpa and eager compute), what the CUDA kernels
do beyond their entry checks, and torch's device-mismatch errors (a host
tensor is never a real device tensor). Which FlashAttention build a 4.57.6
process loads depends on what is installed; here it is FlashAttention 2.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from varlen import fa4_entry, kernel_entry, spec
from varlen.engines import compare, device as stand_ins
from varlen.engines import source as engine_source
from varlen.engines.compare import Difference, Judge
from varlen.engines.device import Observation, output_like, torch_module

NAME = "transformers"
TITLE = "transformers"
HUB_NAME = "kernels-community/flash-attn2"
PROFILES = ("flash_attention_2", "flash_attention_3", "flash_attention_4", HUB_NAME, "sdpa",
            "eager")
DEFAULT_VERSIONS = ("4.57.6", "5.14.1", "5.25.0")
# 1,700 calls per profile: 10,200 per band.
DEFAULT_CALLS = 1700
# Implementations whose kernel is torch's, run for real: judged on their output.
RUN_FOR_REAL = ("sdpa", "eager")

LAYER_FILE = "transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py"
FLASH_UTILS_FILE = "transformers/modeling_flash_attention_utils.py"
FLASH_FILE = "transformers/integrations/flash_attention.py"
SDPA_FILE = "transformers/integrations/sdpa_attention.py"
GENERIC_FILE = "transformers/utils/generic.py"
# The tower whose cu_seqlens step the "tower" entry runs (Qwen3-VL: one
# segment per frame, full attention in every block), and 5.x's helpers.
TOWER_FILE = "transformers/models/qwen3_vl/modeling_qwen3_vl.py"
VISION_UTILS_FILE = "transformers/vision_utils.py"


class Band:
    """One modelled band: its release's wheel and the files judged, pinned;
    or another release (`models`: the band faithful mode judges it by),
    whose wheel is fetched unpinned and whose dependencies are its band's."""

    def __init__(self, version: str, wheel_sha256: Optional[str], files: Dict[str, str],
                 models: str = ""):
        self.version = version
        self.wheel_sha256 = wheel_sha256
        self.files = files
        self.models = models or version
        self.note = ""

    @property
    def wheel_name(self) -> str:
        return f"transformers-{self.version}-py3-none-any.whl"


BANDS = {
    "4.57.6": Band("4.57.6", "4c9e9de11333ddfe5114bc872c9f370509198acf0b87a832a0ab9458e2bd0550", {
        LAYER_FILE: "f5051523300145f66de080765c06bd8080350c15692c096d2c38e73fe9d03099",
        FLASH_UTILS_FILE: "293fe81c6bd38aac8a3bc6ae086ff21b9695b349e97c9650b1fe61e42a36d710",
        FLASH_FILE: "850aa63f9473391188c357454cfb6a89339394d26f6024ccbe246f00f6344144",
        SDPA_FILE: "dc5abe49a98dec3b9026739dfbf2e9a8f3e5272b2916b3c2d404727ac931a013",
        GENERIC_FILE: "94728825190dff491f2e0b93beb59c8246adb0b6049e3203c511405f43bb7e30",
        TOWER_FILE: "dd63ed3b124232735b3dca1bfa28f9d6b0d3f7182afcb75dde8f3e724b2b22da"}),
    "5.14.1": Band("5.14.1", "9db974c4079ede2d1a3ea7ca5a240df33f2cc26fc2b36ba64c5f2a4f43b6e725", {
        LAYER_FILE: "7cdf4e42cb7624123f89f5357553ae222aec3ce0c9c0c49abf183e2fdde06857",
        FLASH_UTILS_FILE: "1cbf31e648d124f24e609ec33f39beac3cd50bd70c207bfc9ff754cd5116b6f4",
        FLASH_FILE: "fd18db15bb84c6ac75b145be9462a1822315fbfbdabf69d964702c6aef7139b9",
        SDPA_FILE: "b72c5c96ea070d594f36e774cfc799160a0ecb157353502a61eb3c5ea1e35b46",
        GENERIC_FILE: "cd444f4d8f1baf5e8a54fb48b2cdc4b6bab0ef575571be2e6b119f584d2de916",
        TOWER_FILE: "fcb5571ef95e4a6679af866ef9ef4dfa5cee017f9f91453daf28c7804c7a50fe",
        VISION_UTILS_FILE: "23828876bb2fe9700d0d68a3374cf9e38086964f97375c9d46d376ab85b265de"}),
    "5.25.0": Band("5.25.0", "8ca7a96cc329e5a053c9e770711e73d7bd9d77240ff62049fca6d253965cda52", {
        LAYER_FILE: "a24f2f5b295ab3578167232bc912926e89afd08416fc17e301ed5beea0d8933b",
        FLASH_UTILS_FILE: "a03eec76c99e56cfe1f7f945f8592ea9c5abe4b3907f4e63ccfec7979d868a8d",
        FLASH_FILE: "13fb51c734b7b608872783a28bdbdd3d5b600600d1d9912ceed580320e45d631",
        SDPA_FILE: "3459958b5609c45a835ea44224d816281807b375a89f9d6e8dee693136fdd782",
        GENERIC_FILE: "fb49fafe94119fb1ff168e4682a72b24ab9392535dd218a4845efcbbd1c6d7b7",
        TOWER_FILE: "7f89585536be4f97f77cb37c8f3d5d80720fd541f6b81fe3b620fbac1e68117b",
        VISION_UTILS_FILE: "bcecd5a92b3266b9926272a549d2b1a0f1fe7646c698c0fa19bd96f976085356"}),
}


def band_dir(version: str) -> Path:
    """Where scripts/python-env installs the band: beside the wheels folder."""
    return engine_source.wheels_dir().parent / f"transformers-{version}"


def check_release(band: Band) -> List[Path]:
    """A release other than a band's own: its wheel fetched (unpinned: its
    SHA-256 is printed) and installed alone into its folder, which comes
    before its band's folder, whose dependencies it shares."""
    folders = check_band(BANDS[band.models])
    wheel = engine_source.fetch_wheel("transformers", band.version, "any",
                                      engine_source.wheels_dir(), band.wheel_name,
                                      who="transformers-differential")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    print(f"transformers-differential: {wheel.name} has SHA-256 {digest}", file=sys.stderr)
    changed = [member for member, sha in BANDS[band.models].files.items()
               if hashlib.sha256(engine_source.read_member(str(wheel), member).encode())
               .hexdigest() != sha]
    band.note = (f"not a modelled release: judged by the {band.models} band; of the files judged, "
                 + (f"{', '.join(changed)} differ from {band.models}'s" if changed else
                    f"none differs from {band.models}'s"))
    folder = band_dir(band.version)
    stamp = folder / "varlen-stamp"
    if not stamp.is_file() or stamp.read_text().strip() != digest:
        if folder.exists():
            shutil.rmtree(folder)
        try:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--disable-pip-version-check", "--target", str(folder), str(wheel)],
                           check=True)
        except (OSError, subprocess.CalledProcessError) as error:
            raise engine_source.Unavailable(f"cannot install {wheel} into {folder}: {error}")
        stamp.write_text(digest + "\n")
    return [folder] + folders


def check_band(band: Band) -> List[Path]:
    """The folders to import the band from, once its wheel has the pinned
    hash and every judged file in its folder is the wheel's own."""
    if band.models != band.version:
        return check_release(band)
    wheel = engine_source.wheels_dir() / band.wheel_name
    if not wheel.is_file():
        raise engine_source.Unavailable(f"no transformers {band.version} wheel at {wheel}: run "
                                        f"scripts/python-env")
    engine_source.fetch_wheel("transformers", band.version, "any", wheel.parent, wheel.name,
                              band.wheel_sha256, "transformers-differential")
    folder = band_dir(band.version)
    for member, sha in band.files.items():
        engine_source.read_member(str(wheel), member, sha,
                                  f"the transformers {band.version} code")
        installed = folder / member
        if not installed.is_file() or \
                hashlib.sha256(installed.read_bytes()).hexdigest() != sha:
            raise engine_source.Unavailable(f"{installed} is not transformers {band.version}'s "
                                            f"{member}: run scripts/python-env")
    return [folder]


# --- the kernels --------------------------------------------------------------------------

# The ops the doors are registered as (their own namespaces: vLLM's and
# SGLang's differentials define theirs in the same process).
FA2_NAMESPACE = "_varlen_tf_flash_attn"
FA3_NAMESPACE = "_varlen_tf_flash_attn_3"
# flash_attn 2.8's custom op flash_attn::_flash_attn_varlen_forward, the
# schema torch infers from its annotations.
FA2_OP_SCHEMA = (
    "varlen_forward(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
    "SymInt max_seqlen_q, SymInt max_seqlen_k, float dropout_p, float softmax_scale, bool causal, "
    "SymInt window_size_left=-1, SymInt window_size_right=-1, float softcap=0., "
    "Tensor? alibi_slopes=None, bool return_softmax=False, Tensor? block_table=None, "
    "Tensor? leftpad_k=None, Tensor? seqused_k=None, bool zero_tensors=False, "
    "SymInt num_splits=0) -> (Tensor, Tensor, Tensor, Tensor)")

_ENGINE: contextvars.ContextVar = contextvars.ContextVar("varlen_transformers_engine")


class Calls:
    """Every kernel call of one forward, in order (4.57.6's per-image path
    makes one per sequence)."""

    def __init__(self):
        self.calls: List[Dict[str, Any]] = []


_CALLS: contextvars.ContextVar = contextvars.ContextVar("varlen_transformers_calls")


def _record(kernel: str, family: int, **args) -> None:
    _CALLS.get().calls.append({"kernel": kernel, "family": family, **args})


def _maybe_contiguous(x):
    return x.contiguous() if x is not None and x.stride(-1) != 1 else x


@functools.lru_cache(maxsize=None)
def _ops():
    """The FA2 and FA3 ops, defined once per process; their kernels run the
    entry checks under the calling engine's device mode."""
    torch = torch_module()
    entry = kernel_entry.FlashEntry(lambda t: _ENGINE.get().device.is_device(t))

    def fa2(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
            softmax_scale, causal, window_size_left=-1, window_size_right=-1, softcap=0.0,
            alibi_slopes=None, return_softmax=False, block_table=None, leftpad_k=None,
            seqused_k=None, zero_tensors=False, num_splits=0):
        with _ENGINE.get().device.Mode():
            q, k, v = [_maybe_contiguous(x) for x in (q, k, v)]
            out, lse = entry.fa2_varlen_fwd(q, k, v, None, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                            leftpad_k, block_table, alibi_slopes, max_seqlen_q,
                                            max_seqlen_k, dropout_p, softmax_scale, zero_tensors,
                                            causal, window_size_left, window_size_right, softcap,
                                            return_softmax, num_splits, None)
            return out, lse, lse.new_empty(0), lse.new_empty(2)

    def fa3(*args):
        with _ENGINE.get().device.Mode():
            return entry.fa3_fwd(*args)

    libraries = []
    for namespace, schema, kernel in ((FA2_NAMESPACE, FA2_OP_SCHEMA, fa2),
                                      (FA3_NAMESPACE, kernel_entry.FA3_FWD_SCHEMA, fa3)):
        library = torch.library.Library(namespace, "DEF")
        library.define(schema)
        library.impl(schema.split("(")[0], kernel, "CPU")
        libraries.append(library)
    return libraries


def _op(namespace: str, name: str):
    _ops()
    return getattr(getattr(torch_module().ops, namespace), name).default


def _not_modelled_gate(error: RuntimeError, what: str):
    # The dispatcher's type gate quotes the op's qualified name and schema,
    # which are ours, not the build's.
    if "Expected a value of type" in str(error) or "expected" in str(error).split("\n")[0]:
        raise kernel_entry.NotModelled(f"{what}'s type gate: {str(error).splitlines()[0]}") \
            from None
    raise error


def _parsed_ints(*values) -> None:
    """The op's argument parser takes a one-element integral tensor for an
    int by reading it on the host: a host sync for a device tensor (the
    stand-ins are host tensors, which the parser reads without asking)."""
    torch = torch_module()
    for x in values:
        if isinstance(x, torch.Tensor) and _ENGINE.get().device.is_device(x) and \
                x.numel() == 1 and not x.is_floating_point():
            stand_ins.LEDGER.get().host_syncs.append("int() by the op's argument parser")


def _fa2_door(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal, window_size,
              softcap, alibi_slopes, block_table):
    """flash_attn 2.8's FlashAttnVarlenFunc.forward: the default scale, the
    head dim padded to a multiple of 8, then its custom op."""
    torch = torch_module()
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    size = q.size(2)
    if size % 8 != 0:
        q, k, v = [torch.nn.functional.pad(x, [0, 8 - size % 8]) for x in (q, k, v)]
    _parsed_ints(max_q, max_k)
    try:
        out = _op(FA2_NAMESPACE, "varlen_forward")(
            q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal,
            window_size[0], window_size[1], softcap, alibi_slopes, False, block_table)[0]
    except RuntimeError as e:
        _not_modelled_gate(e, "flash_attn's custom op")
    return out[..., :size]


def _fa3_door(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale, causal, window_size, softcap,
              num_splits, pack_gqa, sm_margin):
    """hopper's flash_attn_interface: the default scale, q and k made
    contiguous in their last dim (v unless its head or token dim is unit
    stride), then the fwd op."""
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    q, k = _maybe_contiguous(q), _maybe_contiguous(k)
    if v.stride(-1) != 1 and v.stride(-3) != 1:
        v = v.contiguous()
    cu_q, cu_k = _maybe_contiguous(cu_q), _maybe_contiguous(cu_k)
    _parsed_ints(max_q, max_k)
    try:
        out = _op(FA3_NAMESPACE, "fwd")(
            q, k, v, None, None, None, None, cu_q, cu_k, None, None, None, max_q, max_k,
            *([None] * 9), softmax_scale, causal, window_size[0], window_size[1], softcap, False,
            None, num_splits, pack_gqa, sm_margin, None, 1, 0, None)
    except RuntimeError as e:
        _not_modelled_gate(e, "FlashAttention 3's fwd op")
    return out[0]


def _fa4_door(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale):
    """flash_attn.cute's varlen path up to its compile, on sm100."""
    fa4_entry.fa4_varlen_entry(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale,
                               _ENGINE.get().device.is_device, arch=100)
    if isinstance(max_q, torch_module().Tensor) or isinstance(max_k, torch_module().Tensor):
        # Past the entry's checks the CuTe DSL converts the arguments of
        # its compiled call, which fa4_entry does not model.
        raise kernel_entry.NotModelled("the CuTe DSL's conversion of a tensor max_seqlen")
    return output_like(q, v)


def _as_rows(q, k, v):
    """A dense [B, S, H, D] call as the varlen door sees it: B sequences of
    S rows (offsets in int32 on q's device)."""
    torch = torch_module()
    b, s = q.shape[0], q.shape[1]
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=q.device) if s > 0 else \
        torch.zeros(b + 1, dtype=torch.int32, device=q.device)
    flat = [x.reshape(-1, x.shape[-2], x.shape[-1]) for x in (q, k, v)]
    return flat, cu, s


# FlashAttention 2 (flash_attn 2.8; the hub's flash-attn2 has its signature).
def fa2_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
               softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
               alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None):
    _record("flash_attn_varlen_func", 2, q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, dropout_p=dropout_p, causal=causal,
            window_size=window_size)
    return _fa2_door(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                     softmax_scale, causal, window_size, softcap, alibi_slopes, block_table)


def fa2_dense(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    _record("flash_attn_func", 2, q=q, k=k, v=v, softmax_scale=softmax_scale,
            dropout_p=dropout_p, causal=causal, window_size=window_size)
    (fq, fk, fv), cu, s = _as_rows(q, k, v)
    out = _fa2_door(fq, fk, fv, cu, cu, s, s, dropout_p, softmax_scale, causal, window_size,
                    softcap, alibi_slopes, None)
    return out.reshape(q.shape[0], q.shape[1], out.shape[-2], out.shape[-1])


def fa2_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                return_softmax_lse=False):
    raise kernel_entry.NotModelled("the paged branch (flash_attn_with_kvcache)")


# FlashAttention 3 (hopper's flash_attn_interface).
def fa3_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
               seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None,
               k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0,
               softcap=0.0, num_splits=1, pack_gqa=None, deterministic=False, sm_margin=0,
               return_attn_probs=False):
    _record("flash_attn_varlen_func", 3, q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=causal, window_size=window_size)
    return _fa3_door(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale, causal, window_size, softcap, num_splits, pack_gqa, sm_margin)


def fa3_dense(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
              v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
              pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    _record("flash_attn_func", 3, q=q, k=k, v=v, softmax_scale=softmax_scale, causal=causal,
            window_size=window_size)
    (fq, fk, fv), cu, s = _as_rows(q, k, v)
    out = _fa3_door(fq, fk, fv, cu, cu, s, s, softmax_scale, causal, window_size, softcap,
                    num_splits, pack_gqa, sm_margin)
    return out.reshape(q.shape[0], q.shape[1], out.shape[-2], out.shape[-1])


def fa3_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                return_softmax_lse=False):
    raise kernel_entry.NotModelled("the paged branch (flash_attn_with_kvcache)")


# FlashAttention 4 (flash_attn.cute).
def fa4_varlen(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
               max_seqlen_k=None, min_seqlen_k=None, seqused_q=None, seqused_k=None,
               gather_kv_indices=None, page_table=None, softmax_scale=None, causal=False,
               window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1,
               pack_gqa=None, deterministic=False, score_mod=None, score_mod_bwd=None,
               mask_mod=None, block_sparse_tensors=None, aux_tensors=None, aux_scalars=None,
               return_lse=False, scheduler_metadata=None, seqlen_k_per_split=None,
               disable_scheduler_metadata=False):
    _record("flash_attn_varlen_func", 4, q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=causal)
    return _fa4_door(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale)


def fa4_dense(q, k, v, qv=None, gather_kv_indices=None, softmax_scale=None, causal=False,
              window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1,
              pack_gqa=None, deterministic=False, score_mod=None, score_mod_bwd=None,
              mask_mod=None, aux_tensors=None, aux_scalars=None, block_sparse_tensors=None,
              block_sparse_tensors_bwd=None, return_lse=False):
    _record("flash_attn_func", 4, q=q, k=k, v=v, softmax_scale=softmax_scale, causal=causal)
    (fq, fk, fv), cu, s = _as_rows(q, k, v)
    out = _fa4_door(fq, fk, fv, cu, cu, s, s, softmax_scale)
    return out.reshape(q.shape[0], q.shape[1], out.shape[-2], out.shape[-1])


# (flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache) per family.
KERNELS = {2: (fa2_dense, fa2_varlen, fa2_kvcache), 3: (fa3_dense, fa3_varlen, fa3_kvcache),
           4: (fa4_dense, fa4_varlen, None)}
FAMILY_OF = {"flash_attention_2": 2, "flash_attention_3": 3, "flash_attention_4": 4, HUB_NAME: 2}


# --- the band's code ------------------------------------------------------------------------

# The band whose modules are imported now (one at a time: they are all "transformers").
_ACTIVE: Dict[str, Any] = {}
_ROTARY: contextvars.ContextVar = contextvars.ContextVar("varlen_transformers_rotary",
                                                         default=False)


def _rotary_stand_in(q, k, cos, sin):
    # The case says whether the rotary embedding ran (q and k then new dense
    # tensors of their dtype) or q and k reach attention as projected.
    if _ROTARY.get():
        torch = torch_module()
        return (q.clone(memory_format=torch.contiguous_format),
                k.clone(memory_format=torch.contiguous_format))
    return q, k


def _drop_band(folders: List[Path]) -> None:
    """The previous band's modules out of sys.modules and its folders off
    sys.path. Its compiled extension modules go too: the next band's are
    other files (tokenizers 0.22 and 0.23 differ), loaded afresh."""
    prefixes = tuple(str(folder) for folder in folders)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if name == "transformers" or name.startswith("transformers.") or \
                file.startswith(prefixes):
            del sys.modules[name]
    for prefix in prefixes:
        if prefix in sys.path:
            sys.path.remove(prefix)


class TransformersCode:
    """One band's modules, imported from its folder, with the kernels above
    behind `_lazy_imports` and the hub's name registered."""

    def __init__(self, band: Band):
        folders = check_band(band)
        if _ACTIVE:
            _drop_band(_ACTIVE["folders"])
            _ACTIVE.clear()
        torch_module()  # torch and NumPy first, from the environment
        import numpy  # noqa: F401
        # After site-packages: what the environment holds wins.
        sys.path.extend(str(folder) for folder in folders)
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        import transformers
        if transformers.__version__ != band.version:
            raise engine_source.Unavailable(f"{folders[0]} imported transformers "
                                            f"{transformers.__version__}, not {band.version}")
        logging.getLogger("transformers").setLevel(logging.ERROR)
        from transformers import modeling_flash_attention_utils as flash_utils
        from transformers.integrations.flash_attention import flash_attention_forward
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as layer
        from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import \
            Qwen2_5_VLVisionConfig
        self.band = band
        self.folders = folders
        self.flash_utils = flash_utils
        self.layer = layer
        self.functions = ALL_ATTENTION_FUNCTIONS
        self.Config = Qwen2_5_VLVisionConfig
        # 4.57.6 returns four functions and is handed no name; 5.x five, by name.
        self.five = hasattr(flash_utils, "_loaded_implementation")
        self.profile = None
        flash_utils._lazy_imports = self._lazy_imports
        # A hub kernel with FlashAttention 2's signature, as `kernels` registers one.
        ALL_ATTENTION_FUNCTIONS.register(HUB_NAME, flash_attention_forward)
        layer.apply_rotary_pos_emb_vision = _rotary_stand_in
        self.tower_seqlens = _tower_seqlens_step()
        self.window_tower_seqlens = _window_tower_seqlens_step(layer)
        _ACTIVE.update(folders=folders, code=self)

    def _lazy_imports(self, implementation, *args, **kwargs):
        family = FAMILY_OF.get(self.profile, 2) if self.five else 2
        dense, varlen, kvcache = KERNELS[family]
        pad, unpad = self.flash_utils._pad_input, self.flash_utils._unpad_input
        if self.five:
            return dense, varlen, kvcache, pad, unpad
        return dense, varlen, pad, unpad

    def reset(self, profile: str) -> None:
        """A fresh flash import for `profile` (the module caches the last one)."""
        self.profile = profile
        for name in ("_loaded_implementation", "_flash_fn", "_flash_varlen_fn",
                     "_flash_with_kvcache_fn", "_pad_fn", "_unpad_fn",
                     "_process_flash_kwargs_fn", "_process_with_kvcache_kwargs_fn"):
            if hasattr(self.flash_utils, name):
                setattr(self.flash_utils, name, None)

    @functools.lru_cache(maxsize=None)
    def module(self, profile: str, heads: int, head_dim: int):
        """Qwen2_5_VLVisionAttention for `profile`: weights on the meta device
        (nothing reads them), the projection and output projection replaced
        by the stand-ins below, which stay nn.Linear: flash_attention_forward
        takes the target dtype of a float32 q from the first Linear."""
        torch = torch_module()
        config = self.Config(hidden_size=heads * head_dim, num_heads=heads, depth=1,
                             intermediate_size=8, out_hidden_size=8)
        config._attn_implementation = profile
        with torch.device("meta"):
            attn = self.layer.Qwen2_5_VLVisionAttention(config)
        attn.qkv.__class__ = _Projection
        attn.proj.__class__ = _Identity
        return attn.eval()


# What the band's Qwen3-VL tower does with its grid_thw and **kwargs before
# its first block, as the tower's forward spells it.
_TOWER_CALLS = {
    "get_vision_attention_seqlens": "cu_seqlens, max_seqlen = get_vision_attention_seqlens("
                                    "grid_thw, self.config, kwargs=kwargs)",
    "get_vision_cu_seqlens": "cu_seqlens = get_vision_cu_seqlens(grid_thw, kwargs=kwargs)",
}


def _tower_seqlens_step():
    """The band's tower step that makes cu_seqlens (and, from 5.15.0, its
    max): step(grid_thw, config, kwargs) -> (cu_seqlens, the keywords the
    tower passes each block beside **kwargs). 5.x calls a vision_utils
    helper; 4.57.6 computes it inline, and those statements of its
    forward are run as they are."""
    import inspect
    import textwrap
    from transformers.models.qwen3_vl import modeling_qwen3_vl as tower
    source = inspect.getsource(tower.Qwen3VLVisionModel.forward)
    if _TOWER_CALLS["get_vision_attention_seqlens"] in source:
        helper = tower.get_vision_attention_seqlens

        def step(grid_thw, config, kwargs):
            cu, max_seqlen = helper(grid_thw, config, kwargs=kwargs)
            return cu, {"max_seqlen": max_seqlen}
        return step
    if _TOWER_CALLS["get_vision_cu_seqlens"] in source:
        helper = tower.get_vision_cu_seqlens
        return lambda grid_thw, config, kwargs: (helper(grid_thw, kwargs=kwargs), {})
    start = source.index("        cu_seqlens = torch.repeat_interleave(")
    end = source.index("\n", source.index("cu_seqlens = F.pad(cu_seqlens", start))
    code = compile(textwrap.dedent(source[start:end]), tower.__file__, "exec")

    def inline(grid_thw, config, kwargs):
        scope = {"torch": tower.torch, "F": tower.F, "grid_thw": grid_thw}
        exec(code, scope)  # noqa: S102 - the band's own statements
        return scope["cu_seqlens"], {}
    return inline


def _window_tower_seqlens_step(tower):
    """The band's Qwen2.5-VL tower statements that make the windows its
    first block (a window block) attends within: step(grid_thw, config,
    windows, kwargs, hidden_states) -> (cu_window_seqlens, the keywords the
    tower passes that block beside **kwargs). The forward's own statements
    from the first seqlens helper up to the patch embedding (5.x), or 4.57.6's
    window statements and its inline cu_seqlens, run as they are with a
    stand-in `self` holding the config's sizes."""
    import inspect
    import textwrap
    import types
    model = tower.Qwen2_5_VisionTransformerPretrainedModel
    source = inspect.getsource(model.forward)
    if "get_vision_window_index(" in source:
        start = source.index("        cu_seqlens")
        end = source.index("        hidden_states = self.patch_embed(")
        spans = [(start, end)]
    else:
        first = source.index("        window_index, cu_window_seqlens = self.get_window_index(")
        first_end = source.index("\n", source.index("cu_window_seqlens = torch.unique_consecutive("))
        second = source.index("        cu_seqlens = torch.repeat_interleave(")
        second_end = source.index("\n", source.index("cu_seqlens = F.pad(cu_seqlens", second))
        spans = [(first, first_end), (second, second_end)]
    code = [compile(textwrap.dedent(source[a:b]), tower.__file__, "exec") for a, b in spans]
    passes_max = "max_seqlen_now = max_window_seqlen" in source

    def step(grid_thw, config, windows, kwargs, hidden_states):
        merge = windows["spatial_merge_size"]
        self = types.SimpleNamespace(config=config, window_size=windows["window_size"],
                                     patch_size=windows["patch_size"], spatial_merge_size=merge,
                                     spatial_merge_unit=merge * merge)
        if hasattr(model, "get_window_index"):  # 4.57.6 calls its own (deprecated in 5.x)
            self.get_window_index = types.MethodType(model.get_window_index, self)
        scope = dict(vars(tower))
        scope.update(self=self, grid_thw=grid_thw, kwargs=kwargs, hidden_states=hidden_states)
        for part in code:
            exec(part, scope)  # noqa: S102 - the band's own statements
        own = {"max_seqlen": scope["max_window_seqlen"]} if passes_max else {}
        return scope["cu_window_seqlens"], own
    return step


def _linear_classes():
    torch = torch_module()

    class Projection(torch.nn.Linear):
        """qkv(hidden_states): the call's q, k and v, as the layer's
        reshape, permute and unbind of the projection yields them."""

        def forward(self, hidden_states):
            return _Projected(self.qkv_of_call)

    class Identity(torch.nn.Linear):
        def forward(self, x):
            return x

    return Projection, Identity


class _Projected:
    def __init__(self, qkv):
        self.qkv = qkv

    def reshape(self, *shape):
        return self

    def permute(self, *dims):
        return self

    def unbind(self, dim=0):
        return self.qkv


_Projection, _Identity = None, None


def load(band: Band) -> TransformersCode:
    global _Projection, _Identity
    if _Projection is None:
        _Projection, _Identity = _linear_classes()
    code = _ACTIVE.get("code")
    if code is not None and code.band.version == band.version:
        return code
    return TransformersCode(band)


# --- one call ---------------------------------------------------------------------------


class Engine:
    """One band's vision attention, ready to be called."""

    def __init__(self, band: Band):
        self.band = band
        self.device = stand_ins.device_classes((FA2_NAMESPACE, FA3_NAMESPACE))
        _ops()

    def call(self, d: dict) -> Observation:
        """What the band's code did with call `d`. The observation's output is
        the attention's output ([T, H*Dv] from the layer, [1, T, H, Dv] from
        the interface), its capture the kernel calls (Calls)."""
        code = load(self.band)
        torch = torch_module()
        profile = d["profile"]
        m = stand_ins.Materialized(self.device, stand_ins.SingletonCache)
        q, k, v = m.tensor(d["q"]), m.tensor(d["k"]), m.tensor(d["v"])
        d["q_dtype"] = str(q.dtype)  # for the explained differences (the capsule is spent)
        kwargs = {key: m.value(item) for key, item in d["kwargs"].items()}
        raised = output = None
        # Built outside the device mode: its parameters are no device's.
        attn = code.module(profile, int(q.shape[-2]) if q.dim() >= 2 else 1, int(q.shape[-1]))
        with self.calling(d) as (ledger, capture, calls):
            try:
                if d["entry"] in ("layer", "tower"):
                    attn.qkv.qkv_of_call = (q, k, v)
                    hidden = torch.zeros(q.shape[0], 1, device=q.device)
                    angles = torch.zeros(q.shape[0], 2)
                    if d["entry"] == "layer":
                        cu, own = m.value(d["cu_seqlens"]), {}
                    else:  # the tower's step, then its first block's attention
                        tower_kwargs = dict(kwargs)
                        grid = tower_kwargs.pop("grid_thw")
                        if d.get("windows"):
                            cu, own = code.window_tower_seqlens(
                                grid, attn.config, d["windows"], tower_kwargs, hidden)
                        else:
                            cu, own = code.tower_seqlens(grid, attn.config, tower_kwargs)
                        kwargs = tower_kwargs
                    output = attn(hidden, cu_seqlens=cu, **own,
                                  position_embeddings=(angles, angles), **kwargs)
                else:
                    fn = code.layer.eager_attention_forward if profile == "eager" \
                        else code.functions[profile]
                    views = [x.transpose(0, 1).unsqueeze(0) for x in (q, k, v)]
                    output = fn(attn, *views, **kwargs)[0]
            except kernel_entry.NotModelled as e:
                raised = ("NotModelled", str(e))
            except Exception as e:  # the engine's exception is the observation
                raised = (type(e).__name__, str(e))
        capture.kernel = calls.calls[0]["kernel"] if calls.calls else None
        capture.args = {"calls": calls.calls}
        return Observation(raised, capture, ledger, kwargs, tuple(q.shape), m.tensors, output)

    @contextlib.contextmanager
    def calling(self, d: dict):
        """The state the band's code runs in for call `d` (a fresh flash
        import for its profile, the kernels' call log, rotary embeddings) and
        the device mode; yields (ledger, capture, the kernel calls). The
        band's modules are transformers' own, importable by their names."""
        code = load(self.band)
        calls = Calls()
        tokens = (_ENGINE.set(self), _CALLS.set(calls), _ROTARY.set(bool(d.get("rotary"))))
        code.reset(d["profile"])
        try:
            with stand_ins.observing() as (ledger, capture), self.device.Mode():
                yield ledger, capture, calls
        finally:
            _ROTARY.reset(tokens[2])
            _CALLS.reset(tokens[1])
            _ENGINE.reset(tokens[0])


# --- comparing ---------------------------------------------------------------------------

# The tolerance of sdpa's and eager's output against the float64 reference,
# as a fraction of the largest |v| (torch's CPU kernels accumulate in float32).
_TOLERANCE = {"torch.float64": 1e-10, "torch.float32": 2e-5, "torch.float16": 4e-3,
              "torch.bfloat16": 3e-2}


def _strides_agree(predicted, shape, observed) -> bool:
    """The same strides on every dimension of more than one element."""
    if predicted is None or len(predicted) != len(observed):
        return False
    return all(p == o for p, o, n in zip(predicted, observed, shape) if n > 1)


class Comparer(compare.Comparer):
    """The kernel calls of the flash implementations, and the output of sdpa
    and eager."""

    def __init__(self, engine: Engine):
        super().__init__(engine.device)

    def differences(self, d: dict, predicted: dict, seen: Observation) -> List[Difference]:
        if seen.raised is not None and seen.raised[0] == "NotModelled":
            # The judge's own door cannot say what the kernel does.
            return [("not modelled", compare.outcome_text(predicted["raised"]),
                     f"the judge: {seen.raised[1]}")]
        return super().differences(d, predicted, seen)

    def _max(self, x):
        """A max as the kernel's int argument takes it: a one-element integral
        tensor is read (the dispatcher's conversion; counted as its sync)."""
        torch = torch_module()
        if isinstance(x, torch.Tensor) and x.numel() == 1 and not x.is_floating_point():
            return int(self.device.plain(x).reshape(-1)[0])
        return self.as_json(x)

    def argument_differences(self, d: dict, resolved: dict,
                             seen: Observation) -> List[Difference]:
        if d["profile"] in RUN_FOR_REAL:
            return self._output(d, resolved, seen)
        calls = seen.capture.args.get("calls", [])
        if not calls:
            return [("kernel", resolved.get("kernel", "a kernel call"), "no kernel call")]
        pairs: List[Tuple[str, Any, Any]] = []
        loose: List[Tuple[str, Any, Any]] = []
        first = calls[0]
        pairs.append(("kernel", resolved.get("kernel"), first["kernel"]))
        pairs.append(("FlashAttention version", resolved.get("fa_version", 4), first["family"]))
        # The resolved variant as the kernel takes it: causal=True for a
        # right bound of 0 alone, else window_size.
        window = list(resolved.get("window", [-1, -1]))
        causal = window == [-1, 0]
        pairs.append(("causal", causal, bool(first.get("causal", False))))
        pairs.append(("window_size", [-1, -1] if causal else window,
                      [int(x) for x in first.get("window_size", (-1, -1))]))
        if first["kernel"] == "flash_attn_varlen_func":
            if len(calls) != 1:
                pairs.append(("kernel calls", 1, len(calls)))
            a = first
            if self.as_json(a["cu_seqlens_k"]) != self.as_json(a["cu_seqlens_q"]):
                pairs.append(("cu_seqlens_k", "cu_seqlens_q's values", "other values"))
            if self._max(a["max_seqlen_k"]) != self._max(a["max_seqlen_q"]):
                pairs.append(("max_seqlen_k", "max_seqlen_q's value", "another value"))
            seen_cu = self.as_json(a["cu_seqlens_q"])
            if first["family"] == 3 and isinstance(seen_cu, dict):
                # FlashAttention 3's interface makes cu_seqlens contiguous
                # before its op, which faithful mode's arguments describe.
                seen_cu = {key: value for key, value in seen_cu.items() if key != "step"}
            pairs += [("cu_seqlens", resolved["cu_seqlens"], seen_cu),
                      ("max_seqlen", resolved["max_seqlen"], self._max(a["max_seqlen_q"]))]
            rows = [a["q"], a["k"], a["v"]]
        else:
            # Dense calls, one per sequence (one in all for the whole pack):
            # their rows as offsets and their longest.
            offsets, longest = [0], 0
            for a in calls:
                rows_b, s = int(a["q"].shape[0]), int(a["q"].shape[1])
                offsets += [offsets[-1] + s * (i + 1) for i in range(rows_b)]
                longest = max(longest, s)
            pairs += [("cu_seqlens", resolved["cu_seqlens"]["tensor"]
                       if isinstance(resolved["cu_seqlens"], dict) else resolved["cu_seqlens"],
                       offsets),
                      ("max_seqlen", resolved["max_seqlen"], longest)]
            rows = [first["q"][0], first["k"][0], first["v"][0]] if len(calls) == 1 else None
        scale = first["softmax_scale"]
        loose.append(("scale", resolved["scale"],
                      scale if scale is not None else int(first["q"].shape[-1]) ** -0.5))
        if rows is not None and resolved.get("qkv_strides") is not None:
            for name, want, t in zip("qkv", resolved["qkv_strides"], rows):
                if t.numel() and not _strides_agree(want, list(t.shape), list(t.stride())):
                    pairs.append((f"{name} strides", want, list(t.stride())))
        out = [(name, compare.text(p), compare.text(o)) for name, p, o in pairs
               if not compare.same_value(p, o)]
        out += [(name, compare.text(p), compare.text(o)) for name, p, o in loose
                if not compare.same_number(p, o)]
        return out

    def _output(self, d, resolved, seen: Observation) -> List[Difference]:
        """sdpa's or eager's output against softmax(q k^T * scale) v in float64
        over each block faithful mode resolves (the whole pack where it
        resolves none)."""
        torch = torch_module()
        if seen.output is None:
            return [("output", "a tensor", "None")]
        q, k, v = (self.device.plain(seen.tensors[d[n]["id"]]) for n in ("q", "k", "v"))
        tokens, heads, dim_v = int(q.shape[0]), int(q.shape[1]), int(v.shape[-1])
        kv_heads = int(k.shape[1])
        got = self.device.plain(seen.output)
        if got.numel() != tokens * heads * dim_v:
            return [("output shape", f"{tokens} x {heads} x {dim_v}", str(list(got.shape)))]
        # [T, H*Dv] from the layer, [1, T, H, Dv] from the interface: the same rows.
        got = got.reshape(tokens, heads, dim_v)
        blocks = resolved.get("blocks") if resolved.get("mask") == "block_diagonal" \
            else [[0, tokens]]
        scale = float(resolved["scale"])
        group = heads // kv_heads if kv_heads and heads % kv_heads == 0 else 1
        want = torch.zeros(tokens, heads, dim_v, dtype=torch.float64)
        qd, kd, vd = q.double(), k.double(), v.double()
        largest = 0.0  # the largest |score|: softmax's error grows with it
        for start, end in blocks:
            if end <= start:
                continue
            kb = kd[start:end].repeat_interleave(group, dim=1)
            vb = vd[start:end].repeat_interleave(group, dim=1)
            scores = torch.einsum("shd,thd->hst", qd[start:end], kb) * scale
            if resolved.get("causal"):  # is_causal=True at SDPA: no key after the query
                later = torch.ones(end - start, end - start, dtype=torch.bool).triu(1)
                scores = scores.masked_fill(later, float("-inf"))
            if scores.numel():
                largest = max(largest, float(scores.abs().nan_to_num(0.0, posinf=0.0,
                                                                     neginf=0.0).max()))
            want[start:end] = torch.einsum("hst,thd->shd", scores.softmax(-1), vb)
        got = got.double()
        # eager takes its softmax in float32 whatever q's dtype.
        dtype = "torch.float32" if d["profile"] == "eager" and str(q.dtype) == "torch.float64" \
            else str(q.dtype)
        # A score's own rounding (one ulp of the dtype) shifts its weight by as much.
        ulp = {"torch.float64": 2.2e-16, "torch.float32": 1.2e-7, "torch.float16": 9.8e-4,
               "torch.bfloat16": 7.8e-3}.get(dtype, 7.8e-3)
        bound = max(_TOLERANCE.get(dtype, 3e-2), 4 * ulp * largest) * \
            max(1.0, float(vd.abs().max()) if vd.numel() else 1.0)
        finite = torch.isfinite(want)
        if not torch.equal(finite, torch.isfinite(got)):
            d["non_finite_output"] = True  # for the explained differences
            return [("output", "finite where the reference is", "non-finite values elsewhere")]
        error = float((got[finite] - want[finite]).abs().max()) if finite.any() else 0.0
        if error > bound:
            return [("output", f"within {bound:.3g} of the float64 reference",
                     f"max error {error:.3g}")]
        return []


# Differences that are known and why: (version or None for every band,
# profile or None for every profile, which calls, reason).
def _half_precision_overflow(d: dict, predicted: dict) -> bool:
    return bool(d.get("non_finite_output")) and \
        d.get("q_dtype") in ("torch.float16", "torch.bfloat16")


EXPLAINED: List[Tuple[Optional[str], Optional[str], Callable[[dict, dict], bool], str]] = [
    (None, "eager", _half_precision_overflow,
     "eager_attention_forward multiplies q k^T by the scale after a float16 or bfloat16 "
     "matmul: a product beyond the dtype's range is inf (the generated data holds large "
     "integers), where the float64 reference stays finite; faithful mode makes no claim on "
     "numerics"),
]


def judge(version: str) -> Judge:
    """transformers `version` ready to be compared: a modelled band's own
    release, or any other release from 4.53.1 on, judged by its band."""
    band = BANDS.get(version) or Band(version, None, {}, models=spec.transformers_band(version))
    engine = Engine(band)
    load(band)
    return Judge(engine, Comparer(engine), version, band.models, band.wheel_name, band.note,
                 [(profile, test, reason) for v, p, test, reason in EXPLAINED
                  if v in (None, band.models) for profile in ([p] if p else PROFILES)])
