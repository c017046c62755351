#include "varlen/contract/seqlens.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// int(max(diff(cu)).item()), with the host sync it costs when cu is on the
// device.
absl::StatusOr<int64_t> MaxOfDiff(const Tensor& cu) {
  VARLEN_ASSIGN_OR_RETURN(Tensor lengths, internal::SubtractShifted(cu));
  VARLEN_ASSIGN_OR_RETURN(Tensor max, internal::Max(lengths));
  VARLEN_ASSIGN_OR_RETURN(Value item,
                          internal::Item(max, "(cu_seqlens[1:] - cu_seqlens[:-1]).max().item()"));
  return PyInt(item, "max_seqlen");
}

absl::Status HardenedTypeError(std::string message) {
  return PythonError(PyErrorKind::kTypeError, message);
}

absl::Status HardenedValueError(std::string message) {
  return PythonError(PyErrorKind::kValueError, message);
}

}  // namespace

absl::StatusOr<Tensor> GetCuSeqlensForShape(int64_t bsz, int64_t seqlen, Device device) {
  return internal::Arange(0, (bsz + 1) * seqlen, seqlen, DType::kInt32, device);
}

absl::StatusOr<Tensor> ResolveSeqlens(const Value& cu_seqlens, int64_t bsz, int64_t seq_len,
                                      Device device) {
  Value resolved = cu_seqlens;
  if (cu_seqlens.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(Tensor uniform, GetCuSeqlensForShape(bsz, seq_len, device));
    resolved = Value::FromTensor(uniform);
  } else if (cu_seqlens.kind() == Value::Kind::kSingletonCache) {
    SingletonCache& cache = *cu_seqlens.as_cache();
    if (!cache.data.has_value()) {
      VARLEN_ASSIGN_OR_RETURN(Tensor uniform, GetCuSeqlensForShape(bsz, seq_len, device));
      cache.set_data(uniform);
    }
    resolved = Value::FromTensor(*cache.data);
  }
  if (!resolved.is_tensor()) {
    return PythonError(PyErrorKind::kAssertionError, "cu_seqlens must be a torch.Tensor");
  }
  return resolved.as_tensor();
}

absl::StatusOr<int64_t> ResolveMaxSeqlen(const Value& source, const Tensor& cu_seqlens) {
  if (source.kind() == Value::Kind::kSingletonCache) {
    SingletonCache& cache = *source.as_cache();
    if (cache.max_seqlen.has_value()) return *cache.max_seqlen;
    VARLEN_ASSIGN_OR_RETURN(int64_t max, MaxOfDiff(cu_seqlens));
    cache.max_seqlen = max;
    return max;
  }
  return MaxOfDiff(cu_seqlens);
}

absl::StatusOr<int64_t> ResolvePrecomputedMaxSeqlen(const Tensor& cu_seqlens,
                                                    const Value& max_seqlen) {
  if (max_seqlen.is_none()) return MaxOfDiff(cu_seqlens);
  if (max_seqlen.is_tensor()) {
    VARLEN_ASSIGN_OR_RETURN(Value item,
                            internal::Item(max_seqlen.as_tensor(), "max_seqlen.item()"));
    return PyInt(item, "max_seqlen");
  }
  return PyInt(max_seqlen, "max_seqlen");
}

absl::StatusOr<std::vector<int64_t>> CheckTokenOffsets(const Tensor& cu, absl::string_view name,
                                                       std::optional<int64_t> total_tokens) {
  if (!IsIntegral(cu.dtype())) {
    return HardenedTypeError(absl::StrCat(name, " has dtype ", DTypeName(cu.dtype()),
                                          ": token offsets must be int32 or int64"));
  }
  if (cu.dim() != 1 || cu.numel() < 1) {
    return HardenedValueError(absl::StrCat(name, " has shape ", ShapeToString(cu.shape()),
                                           ": token offsets must be 1-d with B+1 >= 1 entries"));
  }
  std::vector<int64_t> offsets = cu.ToHostInts(absl::StrCat(name, ".tolist()"));
  if (offsets[0] != 0) {
    return HardenedValueError(
        absl::StrCat(name, "[0]=", offsets[0], ": token offsets must start at 0"));
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      return HardenedValueError(absl::StrCat(name, "[", i, "]=", offsets[i], " < ", name, "[",
                                             i - 1, "]=", offsets[i - 1],
                                             ": offsets must be non-decreasing"));
    }
    if (offsets[i] > kInt32Max) {
      return HardenedValueError(
          absl::StrCat(name, "[", i, "]=", offsets[i], " > 2147483647: offsets must fit in int32"));
    }
  }
#if VARLEN_BROKEN_RESOLVER
  // The test-only bug (cmake/VarlenHelpers.cmake): offsets that end before
  // the last token pass, and the tail is never computed.
  const bool wrong_end = total_tokens.has_value() && offsets.back() > *total_tokens;
#else
  const bool wrong_end = total_tokens.has_value() && offsets.back() != *total_tokens;
#endif
  if (wrong_end) {
    return HardenedValueError(
        absl::StrCat(name, "[", offsets.size() - 1, "]=", offsets.back(), " != ", *total_tokens,
                     " = q.shape[0]: the last offset must equal the number of packed tokens"));
  }
  return offsets;
}

absl::StatusOr<int64_t> CheckMaxSeqlen(const Value& max_seqlen, int64_t longest,
                                       absl::string_view longest_source, absl::string_view name) {
  int64_t value = 0;
  switch (max_seqlen.kind()) {
    case Value::Kind::kInt:
      value = max_seqlen.as_int();
      break;
    case Value::Kind::kTensor: {
      const Tensor& t = max_seqlen.as_tensor();
      if (!IsIntegral(t.dtype()) || t.numel() != 1) {
        return HardenedTypeError(absl::StrCat(
            name, " is a tensor of dtype ", DTypeName(t.dtype()), " and shape ",
            ShapeToString(t.shape()), ": it must be an int or a one-element integer tensor"));
      }
      VARLEN_ASSIGN_OR_RETURN(Value item, internal::Item(t, absl::StrCat(name, ".item()")));
      value = item.as_int();
      break;
    }
    case Value::Kind::kFloat: {
      return HardenedTypeError(absl::StrCat(name, "=", max_seqlen.Repr(),
                                            " is a float: it must be an int, never truncated"));
    }
    default:
      return HardenedTypeError(absl::StrCat(name, "=", max_seqlen.Repr(), " is a ",
                                            max_seqlen.TypeName(),
                                            ": it must be an int or a one-element integer tensor"));
  }
  if (value < 0) {
    return HardenedValueError(
        absl::StrCat(name, "=", value, " is negative: it must be at least 0"));
  }
  if (value > kInt32Max) {
    return HardenedValueError(
        absl::StrCat(name, "=", value, " > 2147483647: the kernels take an int32 max_seqlen"));
  }
  if (value < longest) {
    return HardenedValueError(absl::StrCat(name, "=", value, " < ", longest, " = ", longest_source,
                                           ": max_seqlen must be at least the longest sequence"));
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> CheckSequenceLengths(const Value& sequence_lengths,
                                                          absl::string_view name) {
  if (!sequence_lengths.is_tensor()) {
    return HardenedTypeError(absl::StrCat(name, "=", sequence_lengths.Repr(), " is a ",
                                          sequence_lengths.TypeName(),
                                          ": it must be an integer tensor"));
  }
  const Tensor& t = sequence_lengths.as_tensor();
  if (!IsIntegral(t.dtype())) {
    return HardenedTypeError(
        absl::StrCat(name, " has dtype ", DTypeName(t.dtype()), ": it must be int32 or int64"));
  }
  std::vector<int64_t> lengths = t.ToHostInts(absl::StrCat(name, ".tolist()"));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      return HardenedValueError(
          absl::StrCat(name, "[", i, "]=", lengths[i], ": lengths must be non-negative"));
    }
    if (lengths[i] > kInt32Max) {
      return HardenedValueError(
          absl::StrCat(name, "[", i, "]=", lengths[i], " > 2147483647: lengths must fit in int32"));
    }
  }
  return lengths;
}

absl::Status CheckElementOffsetsFitInt32(int64_t total_tokens, absl::string_view tokens_name,
                                         int64_t elem_per_token, absl::string_view elem_name) {
  if (elem_per_token > 0 && total_tokens > kInt32Max / elem_per_token) {
    return HardenedValueError(absl::StrCat(
        tokens_name, "=", total_tokens, " tokens x ", elem_name, "=", elem_per_token, " = ",
        total_tokens * elem_per_token, " > 2147483647: element offsets must fit in int32 (at most ",
        kInt32Max / elem_per_token, " tokens at this width)"));
  }
  return absl::OkStatus();
}

Longest FindLongest(const std::vector<int64_t>& lengths, absl::string_view name) {
  Longest longest;
  if (lengths.empty()) {
    longest.source = absl::StrCat("0 (", name, " is empty)");
    return longest;
  }
  size_t at = 0;
  for (size_t i = 1; i < lengths.size(); ++i) {
    if (lengths[i] > lengths[at]) at = i;
  }
  longest.value = lengths[at];
  longest.index = static_cast<int64_t>(at);
  longest.source = absl::StrCat(name, "[", at, "]");
  return longest;
}

std::vector<int64_t> OffsetsToLengths(const std::vector<int64_t>& offsets) {
  std::vector<int64_t> lengths;
  for (size_t i = 1; i < offsets.size(); ++i) lengths.push_back(offsets[i] - offsets[i - 1]);
  return lengths;
}

std::vector<int64_t> LengthsToOffsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> offsets = {0};
  for (int64_t length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

}  // namespace varlen
