#include "varlen/contract/vllm/metadata.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

// compute_max_seqlen: the longest sequence for the backends that launch by
// it, and len(cu) >= 2; FLASHINFER's then bucketed. The model then builds
// torch.tensor(value, dtype=torch.int32), which refuses a Python int outside
// int32 rather than wrapping it.
absl::StatusOr<Tensor> MaxSeqlenTensor(Profile profile, const Tensor& cu) {
  int64_t longest = 0;
  if (profile != Profile::kVllmTorchSdpa && cu.numel() >= 2) {
    const Tensor lengths = internal::Diff(cu);
    longest = lengths.IntAtLogical(0);
    for (int64_t i = 1; i < lengths.numel(); ++i) {
      longest = std::max(longest, lengths.IntAtLogical(i));
    }
  }
  const int64_t value =
      profile == Profile::kVllmFlashinfer ? VllmBucketedMaxSeqlen(longest) : longest;
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "value cannot be converted to type int32 without overflow");
  }
  return Tensor::FromInts({value}, DType::kInt32, Device::kCpu, Shape{});
}

}  // namespace

int64_t VllmBucketedMaxSeqlen(int64_t real_max) {
  if (real_max <= 0) return kVllmMaxSeqlenBuckets.front();
  for (int64_t bucket : kVllmMaxSeqlenBuckets) {
    if (bucket >= real_max) return bucket;
  }
  // round_up on Python's ints, which do not wrap: saturated where the
  // result would outgrow int64 (it fails the int32 conversion either way).
  constexpr int64_t kLast = kVllmMaxSeqlenBuckets.back();
  const int64_t multiples = real_max / kLast + (real_max % kLast != 0 ? 1 : 0);
  return multiples > std::numeric_limits<int64_t>::max() / kLast
             ? std::numeric_limits<int64_t>::max()
             : multiples * kLast;
}

absl::StatusOr<VllmEncoderMetadata> PrepareVllmEncoderMetadata(Profile profile, const Tensor& cu,
                                                               const VllmMetadataOptions& options,
                                                               Device device, Mode mode) {
  if (EngineOf(profile) != Engine::kVllm) {
    return absl::InvalidArgumentError(
        absl::StrCat("vLLM's encoder metadata builders are called for a vLLM profile, not ",
                     QualifiedProfileName(profile)));
  }
  const bool flashinfer = profile == Profile::kVllmFlashinfer;
  const int64_t scale = options.fp8_padded_hidden_size.value_or(options.hidden_size) /
                        std::max<int64_t>(options.tp_size, 1);
  if (mode == Mode::kHardened) {
    VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                            CheckTokenOffsets(cu, "cu_seqlens", std::nullopt));
    if (flashinfer) {
      if (options.tp_size <= 0 || scale <= 0) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("hidden_size=", options.hidden_size, " // tp_size=", options.tp_size,
                         " = ", scale, ": the elements per token must be positive"));
      }
      // The v section is three times q's, unless FP8 packs them densely.
      const int64_t v_factor = options.fp8_padded_hidden_size.has_value() ? 1 : 3;
      VARLEN_RETURN_IF_ERROR(CheckElementOffsetsFitInt32(
          offsets.back(), "cu_seqlens[-1]", scale * v_factor,
          v_factor == 3 ? "3 * hidden_size // tp_size" : "fp8_padded_hidden_size // tp_size"));
    }
  }
  if (!IsIntegral(cu.dtype()) || cu.dim() != 1 || cu.device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("the builders take the host token offsets as a 1-d integer NumPy array; got ",
                     cu.DebugString()));
  }
  VllmEncoderMetadata metadata;
  VARLEN_ASSIGN_OR_RETURN(Tensor max_seqlen, MaxSeqlenTensor(profile, cu));
  metadata.max_seqlen = Value::FromTensor(std::move(max_seqlen));
  Tensor offsets = cu;
  if (flashinfer) {
    // Qwen3-VL's metadata: the padded lengths, in the offsets' dtype.
    const int64_t batch = std::max<int64_t>(cu.numel() - 1, 0);
    const int64_t padded = PaddedBatchSize(batch);
    metadata.sequence_lengths =
        Value::FromTensor(internal::To(internal::PadTo(internal::Diff(cu), padded, 0), device,
                                       cu.dtype(), "async_tensor_h2d(sequence_lengths)"));
    if (cu.numel() == 0) {
      return PythonError(PyErrorKind::kIndexError,
                         "index -1 is out of bounds for axis 0 with size 0");
    }
    Tensor qko = internal::MulScalar(cu, scale);
    Tensor v = options.fp8_padded_hidden_size.has_value() ? qko : internal::MulScalar(qko, 3);
    // add_padding_to_seqlens is a no-op at a bucket; else it repeats the last.
    const auto pad = [&](const Tensor& section) {
      return batch == padded
                 ? section
                 : internal::PadTo(section, padded + 1, section.IntAtLogical(section.numel() - 1));
    };
    offsets = internal::Cat({pad(qko), pad(v)});
  }
  metadata.cu_seqlens =
      Value::FromTensor(internal::To(offsets, device, cu.dtype(), "async_tensor_h2d(cu_seqlens)"));
  return metadata;
}

}  // namespace varlen
