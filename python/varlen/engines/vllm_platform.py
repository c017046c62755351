"""vLLM 0.33.0's choice of a vision encoder's attention, run from the wheel.

MMEncoderAttention.__init__ asks the platform for its backend
(`current_platform.get_vit_attn_backend(head_size, dtype, backend=override)`)
and, for FLASH_ATTN, asks `fa_utils.get_flash_attn_version(head_size=...)`
which FlashAttention to run. This module runs those functions as the wheel
has them, unchanged:

* the platform classes' `get_supported_vit_attn_backends` and
  `get_vit_attn_backend` (platforms/interface.py's Platform, which the CPU
  platform keeps, cuda.py's CudaPlatformBase, rocm.py's RocmPlatform and
  xpu.py's XPUPlatform), with interface.py's `DeviceCapability`,
  `has_device_capability` and `is_device_capability_family`, on a stand-in
  whose device capability is the case platform's;
* `get_flash_attn_version` (v1/attention/backends/fa_utils.py) with
  vllm_flash_attn/flash_attn_interface.py's `is_fa_version_supported`, for a
  build that has FlashAttention 2, 3 and 4 (the wheel ships all three), the
  profile's version standing for `attention_config.flash_attn_version`.

`choice(platform, profile, dtype, head_size)` answers what the layer runs
(`("FLASH_ATTN", 3)`, `("TORCH_SDPA", None)`, ...; on CUDA a version of None
is the op's default, FlashAttention 2), or the exception selection raises. python/tests/test_vllm_platform.py holds faithful mode's
platform rules (lib/contract/vllm/platform.cc) to it.

What it does not cover: the default choice without an override (a case's
profile always names its backend), ROCm's AITER and flash_attn probes (only
reached without an override), out-of-tree platforms (NPU, MUSA), and the
model config's fields that steer FlashAttention's version for text models
(ALiBi, sinks, soft capping, the KV cache).
"""

from __future__ import annotations

import __future__
import ast
import logging
import types
from typing import Any, Dict, Iterable, NamedTuple, Optional, Tuple

from varlen.engines import source as engine_source
from varlen.engines import vllm as vllm_engine

INTERFACE_FILE = "vllm/platforms/interface.py"
CUDA_FILE = "vllm/platforms/cuda.py"
ROCM_FILE = "vllm/platforms/rocm.py"
XPU_FILE = "vllm/platforms/xpu.py"
FA_UTILS_FILE = "vllm/v1/attention/backends/fa_utils.py"
SOURCE_SHA256 = {
    INTERFACE_FILE: "11f06cfa184fa7380177eaf26bca58c421306f0eea273c9f35519d35ff4a6f75",
    CUDA_FILE: "0cfa80cce99aae194689d822edef808e5c78454eec696fb1c2ded7d17dfe71bb",
    ROCM_FILE: "74a22fa65827eadd28cc9f095ac35bea53d9afc6e40503a505a49bbc49be0209",
    XPU_FILE: "cffd8bb94d6d4d6997d30299b91e3d2f249372cad43cb8fa06937e8a111bad18",
    FA_UTILS_FILE: "d2ab2c0bf1daea3a6b73481c9e4438833fcd1ee714fa66869d279ca552948cdf",
    vllm_engine.FLASH_INTERFACE_FILE: vllm_engine.SOURCE_SHA256[vllm_engine.FLASH_INTERFACE_FILE],
    vllm_engine.REGISTRY_FILE: vllm_engine.SOURCE_SHA256[vllm_engine.REGISTRY_FILE],
}

# Each platform kind a case can name, as the class vLLM runs on it.
_CLASSES = {"cuda": (CUDA_FILE, "CudaPlatformBase"), "hip": (ROCM_FILE, "RocmPlatform"),
            "xpu": (XPU_FILE, "XPUPlatform"), "cpu": (INTERFACE_FILE, "Platform"),
            "other": (INTERFACE_FILE, "Platform")}
_SELECTION = ("get_supported_vit_attn_backends", "get_vit_attn_backend")


class _Quiet(logging.LoggerAdapter):
    def info_once(self, *args, **kwargs):
        pass

    def warning_once(self, *args, **kwargs):
        pass

    def debug_once(self, *args, **kwargs):
        pass

    def log(self, *args, **kwargs):  # error(), warning(), ...: selection's notes, not ours
        pass


def _methods(source: str, filename: str, class_name: str, names: Iterable[str],
             namespace: Dict[str, Any]) -> Dict[str, Any]:
    """`names`, methods of `class_name` in `source`, compiled at their own
    lines in `namespace` (their decorators dropped: all are classmethods)."""
    tree = ast.parse(source, filename)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name),
               None)
    found: Dict[str, Any] = {}
    for node in cls.body if cls is not None else []:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec",
                           flags=__future__.annotations.compiler_flag, dont_inherit=True)
            exec(code, namespace)
            found[node.name] = classmethod(namespace.pop(node.name))
    missing = set(names) - set(found)
    if missing:
        raise engine_source.Unavailable(f"{filename}: {class_name} defines no "
                                        f"{', '.join(sorted(missing))}")
    return found


class Platform(NamedTuple):
    """A case's platform: its kind and device capability."""
    kind: str
    major: int = 0
    minor: int = 0

    @staticmethod
    def parse(spelled: str) -> "Platform":
        base = spelled.split("+")[0]
        kind, _, capability = base.partition(":")
        major, _, minor = capability.partition(".")
        return Platform(kind, int(major or 0), int(minor or 0))


class VllmSelection:
    """The wheel's selection code, loaded once."""

    def __init__(self, wheel: str):
        import torch
        sources = {member: engine_source.read_member(wheel, member, sha,
                                                     f"the vLLM {vllm_engine.VLLM_VERSION} code")
                   for member, sha in SOURCE_SHA256.items()}
        self.AttentionBackendEnum = vllm_engine._backend_enum(sources[vllm_engine.REGISTRY_FILE])
        logger = _Quiet(logging.getLogger("varlen.vllm_platform"), {})
        interface = engine_source.load_module(
            "varlen_vllm_platform_interface", sources[INTERFACE_FILE], f"{wheel}/{INTERFACE_FILE}",
            ("DeviceCapability",), {}, ("typing",))
        namespace = {"AttentionBackendEnum": self.AttentionBackendEnum, "logger": logger,
                     "torch": torch, "DeviceCapability": interface.DeviceCapability}
        base_methods = _methods(sources[INTERFACE_FILE], f"{wheel}/{INTERFACE_FILE}", "Platform",
                                _SELECTION + ("has_device_capability",
                                              "is_device_capability_family"), dict(namespace))
        self._classes = {}
        for kind, (member, class_name) in _CLASSES.items():
            methods = dict(base_methods)
            if member != INTERFACE_FILE:
                methods.update(_methods(sources[member], f"{wheel}/{member}", class_name,
                                        _SELECTION, dict(namespace)))
            self._classes[kind] = methods
        self._DeviceCapability = interface.DeviceCapability
        # fa_utils and flash_attn_interface ask `current_platform`, which
        # choice() sets per call; the version comes from this config.
        self._config = types.SimpleNamespace(
            attention_config=types.SimpleNamespace(flash_attn_version=None),
            model_config=None, cache_config=None)
        self._platforms = types.SimpleNamespace(current_platform=None)
        modules: Dict[str, types.ModuleType] = {
            "vllm.platforms": self._platforms,
            "vllm.config": types.SimpleNamespace(get_current_vllm_config_or_none=lambda: self._config)}
        flash_interface = engine_source.load_module(
            "varlen_vllm_flash_interface", sources[vllm_engine.FLASH_INTERFACE_FILE],
            f"{wheel}/{vllm_engine.FLASH_INTERFACE_FILE}",
            ("is_fa_version_supported", "fa_version_unsupported_reason", "DEFAULT_FA_VERSION"),
            {"FA2_AVAILABLE": True, "FA3_AVAILABLE": True, "FA4_AVAILABLE": True,
             "FA2_UNAVAILABLE_REASON": None, "FA3_UNAVAILABLE_REASON": None,
             "FA4_UNAVAILABLE_REASON": None}, (), imports=modules.get)
        modules["vllm.vllm_flash_attn.flash_attn_interface"] = flash_interface
        # The op's version when the layer's is None (vit_attn_wrappers.py
        # passes none; flash_attn_varlen_func's default).
        self.default_fa_version = flash_interface.DEFAULT_FA_VERSION
        self._fa_utils = engine_source.load_module(
            "varlen_vllm_fa_utils", sources[FA_UTILS_FILE], f"{wheel}/{FA_UTILS_FILE}",
            ("get_flash_attn_version",),
            {"current_platform": None, "init_logger": lambda name: logger,
             "envs": types.SimpleNamespace(VLLM_BATCH_INVARIANT=False),
             "is_quantized_kv_cache": lambda dtype: False}, ("typing",), imports=modules.get)

    def platform_class(self, platform: Platform) -> type:
        """The platform's class, with the case's device capability (none on
        the kinds vLLM gives none: XPU and the CPU)."""
        capability = (self._DeviceCapability(platform.major, platform.minor)
                      if platform.kind in ("cuda", "hip") else None)
        flags = {f"is_{k}": staticmethod(lambda k=k: platform.kind == k)
                 for k in ("cuda", "rocm", "xpu", "cpu")}
        flags["is_rocm"] = staticmethod(lambda: platform.kind == "hip")
        return type(f"{platform.kind}_platform", (), {
            **self._classes[platform.kind], **flags,
            "get_device_capability": classmethod(lambda cls, device_id=0: capability)})

    def flash_attn_version(self, current_platform: type, head_size: int,
                           configured: Optional[int]) -> Optional[int]:
        """fa_utils.get_flash_attn_version(head_size=head_size) on
        `current_platform`, with attention_config.flash_attn_version =
        `configured`."""
        self._platforms.current_platform = current_platform
        self._fa_utils.current_platform = current_platform
        self._config.attention_config.flash_attn_version = configured
        return self._fa_utils.get_flash_attn_version(head_size=head_size)

    def choice(self, platform: Platform, profile: str, dtype: str,
               head_size: int) -> Tuple[str, Optional[int]]:
        """What MMEncoderAttention built with `profile` as its override runs
        on `platform`: (backend, FlashAttention version or None). Raises what
        the selection raises."""
        import torch
        backend, _, version = profile.partition("/fa")
        cls = self.platform_class(platform)
        chosen = cls.get_vit_attn_backend(head_size, getattr(torch, dtype),
                                          backend=self.AttentionBackendEnum[backend])
        if chosen.name not in ("FLASH_ATTN", "ROCM_AITER_FA"):
            return chosen.name, None
        fa_version = self.flash_attn_version(cls, head_size, int(version) if version else None)
        if fa_version is None and platform.kind == "cuda":
            fa_version = self.default_fa_version
        return chosen.name, fa_version
