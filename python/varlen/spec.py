"""How a Python attention backend describes itself to the harness.

Two kinds, each registered with one line (varlen.register):

* KernelBackend: a function given a resolved launch, exactly what a C++
  backend receives in VarlenAttentionParams:

      fn(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale)

  q, k, v are [T, H, D] tensors in their real layout and strides, o is the
  [T, H, Dv] output to fill (or return a tensor of that shape, which the
  harness copies into o), cu_seqlens_* are int32 token offsets, the max
  lengths ints and the scale a float.

* CallBackend: an engine's own backend object, called as the engine calls it
  (SGLang's VisionAttention: forward(q, k, v, bsz, cu_seqlens=..., **kwargs);
  vLLM's MMEncoderAttention: forward(query, key, value, cu_seqlens=...,
  max_seqlen=..., sequence_lengths=...)); the harness builds each argument in
  the exact form a case names and judges what forward raises or returns
  against faithful mode's prediction. In transformers' convention it is an
  attention function registered in AttentionInterface under `profile`,
  fn(module, query, key, value, attention_mask, **kwargs) -> (output, weights),
  called as the band's VisionAttention calls it.

Nothing here imports the compiled core, so backend modules can be written and
tested without it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Tuple

DTYPES = ("float32", "float16", "bfloat16", "float64")
# Each engine's calling conventions (its profiles), by the engine's name.
ENGINE_PROFILES = {
    "sglang": ("flashinfer_cudnn", "fa3", "triton_attn", "sdpa", "fa4", "aiter_attn",
               "ascend_attn", "amx_attn", "xpu_attn"),
    "vllm": ("FLASH_ATTN/fa2", "FLASH_ATTN/fa3", "TRITON_ATTN", "TORCH_SDPA", "FLASHINFER"),
    "transformers": ("flash_attention_2", "flash_attention_3", "flash_attention_4",
                     "kernels-community/flash-attn2", "sdpa", "eager"),
}
# SGLang's backend class of each of its profiles (vision.py).
SGLANG_BACKEND_CLASSES = {
    "triton_attn": "VisionTritonAttention", "sdpa": "VisionSdpaAttention",
    "fa3": "VisionFlash3Attention", "fa4": "VisionFlash4Attention",
    "flashinfer_cudnn": "VisionFlashInferAttention", "ascend_attn": "VisionAscendAttention",
    "aiter_attn": "VisionAiterAttention", "amx_attn": "VisionAMXAttention",
    "xpu_attn": "VisionIntelXPUAttention",
}
# Every profile name, and each engine's qualified ("transformers:sdpa"): a
# name two engines share is SGLang's unless qualified.
PROFILES = tuple(dict.fromkeys(p for profiles in ENGINE_PROFILES.values() for p in profiles)) + \
    tuple(f"{engine}:{p}" for engine, profiles in ENGINE_PROFILES.items() for p in profiles)
# The engines whose backends CallBackend calls in their own convention.
CALL_LEVEL_ENGINES = ("sglang", "vllm", "transformers")
TRANSFORMERS_HUB_FLASH = "kernels-community/flash-attn2"


def transformers_band(version: str) -> str:
    """The modelled transformers band a release belongs to: 4.53.1 to 4.57.x
    the exact-name flash gate (4.57.6), 5.0 to 5.14.x the substring gate with
    a tensor max (5.14.1), 5.15.0 on an int max (5.25.0)."""
    try:
        release = tuple(int(part) for part in version.split(".")[:3])
    except ValueError:
        raise ValueError(f"transformers {version!r} is not a release number such as 5.24.0")
    if (4, 53, 1) <= release < (5, 0):
        return "4.57.6"
    if (5, 0) <= release < (5, 15):
        return "5.14.1"
    if release >= (5, 15):
        return "5.25.0"
    raise ValueError(f"transformers {version} is older than 4.53.1, the first release whose "
                     "vision attention goes through the attention interface as modelled")


def transformers_profile(name: str) -> str:
    """The profile whose path transformers' vision layer takes for a
    function registered under `name`: FlashAttention's own names, any other
    name holding "flash" (the hub kernels' path), or the split path."""
    if name in ENGINE_PROFILES["transformers"][:3]:
        return name
    return TRANSFORMERS_HUB_FLASH if "flash" in name else "sdpa"


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend runs; a case outside it is "not supported"."""

    dtypes: Tuple[str, ...] = ("float32", "float16", "bfloat16")
    max_head_dim: int = 256
    grouped_query_attention: bool = True
    distinct_value_head_dim: bool = False
    strided_inputs: bool = True
    device: str = "cpu"  # or "cuda"
    # Kernel level: the calling conventions whose launches it takes (empty:
    # every one). Call level: ignored, the CallBackend names its profile.
    profiles: Tuple[str, ...] = ()
    max_tokens: int = 0  # 0: no limit
    max_sequences: int = 0

    def __post_init__(self):
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"Capabilities.dtypes: {dtype!r} is not one of {DTYPES}")
        for profile in self.profiles:
            if profile not in PROFILES:
                raise ValueError(f"Capabilities.profiles: {profile!r} is not one of {PROFILES}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"Capabilities.device: {self.device!r} is not 'cpu' or 'cuda'")
        if self.max_head_dim <= 0:
            raise ValueError(f"Capabilities.max_head_dim={self.max_head_dim} must be positive")


@dataclasses.dataclass(frozen=True)
class KernelBackend:
    name: str
    fn: Callable[..., Any]
    capabilities: Capabilities = Capabilities()
    description: str = ""


@dataclasses.dataclass(frozen=True)
class CallContext:
    """What an engine's backend object is constructed from, per call.

    For vLLM, num_heads, head_dim (head_size), num_kv_heads and softmax_scale
    (scale, None for the default) are MMEncoderAttention's constructor
    arguments, as the model built the layer.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_v: int
    dtype: Any  # a torch dtype
    device: str  # "cpu" or "cuda": where q, k and v live
    profile: str
    engine: str
    version: str
    entry: str  # "direct", "layer" or (transformers) "tower"
    graph_mode: bool
    # sdpa's constructor options (SdpaOptions in the C++ contract).
    flatten_batch: bool = False
    softmax_in_single_precision: bool = False
    softmax_scale: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class CallBackend:
    name: str
    # make(CallContext) -> an object whose forward() the harness calls
    # (transformers: the attention function itself).
    make: Callable[[CallContext], Any]
    # The calling convention; in transformers', the name the function is
    # registered under in AttentionInterface.
    profile: str
    engine: str = "sglang"
    version: str = ""  # the engine's release faithful mode predicts it by; "": the latest modelled
    capabilities: Capabilities = Capabilities()
    # The engine's own classes, so isinstance checks in its code hold: its
    # VisionAttentionMetadata (fields cu_seqlens, seq_lens, max_seqlen,
    # packed_indptrs, sequence_lengths, flashinfer_max_seqlen) and its
    # SingletonCache (set_data / get_data / empty). None: varlen's stand-ins.
    metadata_class: Optional[type] = None
    singleton_cache_class: Optional[type] = None
    description: str = ""

    def __post_init__(self):
        if self.engine not in ENGINE_PROFILES:
            raise ValueError(f"CallBackend.engine: {self.engine!r} is not one of "
                             f"{tuple(ENGINE_PROFILES)}")
        if self.engine == "transformers":
            if not isinstance(self.profile, str) or not self.profile or self.profile == "eager":
                raise ValueError(f"CallBackend.profile: {self.profile!r}: a transformers "
                                 "attention function is registered under a non-empty name "
                                 "other than 'eager' (4.57.x calls its own "
                                 "eager_attention_forward for it)")
            if self.version:
                transformers_band(self.version)
            return
        profiles = ENGINE_PROFILES[self.engine]
        if self.profile not in profiles:
            raise ValueError(f"CallBackend.profile: {self.profile!r} is not one of {self.engine}'s "
                             f"{profiles}")

    @property
    def modelled_profile(self) -> str:
        """The harness's profile for this backend, qualified by its engine."""
        if self.engine == "transformers":
            return f"transformers:{transformers_profile(self.profile)}"
        return self.profile

    @property
    def modelled_version(self) -> str:
        """The engine version faithful mode predicts it by ("": the latest)."""
        if self.engine == "transformers" and self.version:
            return transformers_band(self.version)
        return self.version
