// Fuzz target: both metadata builders (contract rules 5-9, 25) on decoded
// cu_seqlens of up to 80 sequences and billions of tokens. Only the B+1
// offsets are tensors, so geometries far beyond any forward run cost
// microseconds. Every result is checked against int64 arithmetic done here:
//
//   * faithful mode computes what torch computes, int32 wrap included:
//     cu_seqlens.to(int32), their diffs, the max, the batch padded to its
//     bucket, the bucketed max, the element-unit packed indptrs [qk | v | o]
//     padded with the total, and the padded lengths shaped (B_pad, 1, 1, 1);
//   * hardened mode succeeds exactly when the offsets are well formed and
//     total * elem_per_token fits in int32, and then no value has wrapped;
//   * never a crash or undefined behaviour.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "varlen/cases/correct_call.h"
#include "varlen/contract/sglang/metadata.h"
#include "violation.h"

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

struct Input {
  std::vector<int64_t> lengths;  // the intended sequences
  std::vector<int64_t> offsets;  // what the caller passes (maybe not OffsetsOf(lengths))
  varlen::DType dtype = varlen::DType::kInt32;
  int64_t heads = 1, head_dim = 1, elem_per_token = 1;
  varlen::Mode mode = varlen::Mode::kFaithful;
};

int64_t Length(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      return in.PickValueInArray<int64_t>({0, 1, 4095, 4096, 4097, 131072, 131073, 1 << 20});
    case 1:
      return in.ConsumeIntegralInRange<int64_t>(0, 64);
    case 2:
      return in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 24);
    default:
      return in.ConsumeIntegralInRange<int64_t>(0, 4096);
  }
}

Input Decode(FuzzedDataProvider& in) {
  Input x;
  x.mode = in.ConsumeBool() ? varlen::Mode::kHardened : varlen::Mode::kFaithful;
  const int count = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(1, 9)
                                     : in.ConsumeIntegralInRange<int>(1, 80);
  for (int i = 0; i < count; ++i) x.lengths.push_back(Length(in));
  x.offsets = varlen::OffsetsOf(x.lengths);
  x.heads = in.ConsumeIntegralInRange<int64_t>(1, 16);
  x.head_dim = in.ConsumeIntegralInRange<int64_t>(1, 256);
  x.elem_per_token = x.heads * x.head_dim;
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    x.elem_per_token = in.ConsumeIntegral<int32_t>();  // a caller's mistake
  }
  // Offsets past int32 only fit an int64 tensor; a caller may also pass
  // int64 offsets that do fit.
  x.dtype = x.offsets.back() > kInt32Max || in.ConsumeBool() ? varlen::DType::kInt64
                                                             : varlen::DType::kInt32;
  if (in.ConsumeIntegralInRange<int>(0, 5) == 0) {
    // A corrupted offset: not starting at 0, decreasing, negative, huge.
    const size_t i = in.ConsumeIntegralInRange<size_t>(0, x.offsets.size() - 1);
    x.offsets[i] = in.ConsumeIntegralInRange<int64_t>(-2, x.offsets.back() + 2);
    if (x.dtype == varlen::DType::kInt32) x.offsets[i] = Wrap32(x.offsets[i]);
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) x.offsets.resize(1);  // [0]: no sequence
  return x;
}

// The call as a case file: the metadata the builder was asked for, the
// intended sequences as the ground truth.
varlen::Case AsCase(const Input& x, varlen::MetadataSpec::Builder builder) {
  varlen::Case c;
  c.name = "builders";
  c.source = "fuzz target builders";
  c.mode = x.mode;
  c.geometry.seq_lens = x.lengths;
  c.geometry.num_heads = c.geometry.num_kv_heads = x.heads;
  c.geometry.head_dim = c.geometry.head_dim_v = x.head_dim;
  varlen::MetadataSpec m;
  m.builder = builder;
  m.elem_per_token = x.elem_per_token;
  m.cu_seqlens = varlen::ArgLiteral::IntTensor(x.offsets, x.dtype, varlen::Device::kCuda);
  c.call.profile = builder == varlen::MetadataSpec::Builder::kPlain
                       ? varlen::Profile::kFa3
                       : varlen::Profile::kFlashinferCudnn;
  c.call.forward_metadata = m;
  return c;
}

std::vector<int64_t> Ints(const varlen::Value& v) {
  if (!v.is_tensor()) return {};
  const varlen::Tensor& t = v.as_tensor();
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.IntAt(i));
  return out;
}

std::string Show(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

bool WellFormed(const std::vector<int64_t>& offsets) {
  if (offsets.size() < 2 || offsets[0] != 0) return false;
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1] || offsets[i] > kInt32Max) return false;
  }
  return true;
}

// What the plain builder's tensors hold, computed as torch does in int32.
struct Expected {
  std::vector<int64_t> cu, seq_lens;
  int64_t max = 0;
};

Expected PlainExpected(const std::vector<int64_t>& offsets) {
  Expected e;
  for (int64_t o : offsets) e.cu.push_back(Wrap32(o));
  for (size_t i = 1; i < e.cu.size(); ++i) e.seq_lens.push_back(Wrap32(e.cu[i] - e.cu[i - 1]));
  e.max = *std::max_element(e.seq_lens.begin(), e.seq_lens.end());
  return e;
}

void Check(bool ok, const Input& x, varlen::MetadataSpec::Builder builder,
           const std::string& property, const std::string& detail) {
  if (!ok) varlen::ReportViolation(property, detail, AsCase(x, builder));
}

void CheckPlain(const Input& x) {
  using Builder = varlen::MetadataSpec::Builder;
  const varlen::Value cu = varlen::Value::FromTensor(
      varlen::Tensor::FromInts(x.offsets, x.dtype, varlen::Device::kCuda));
  const auto built = varlen::PrepareVisionAttentionMetadata(cu, varlen::Device::kCuda, {}, x.mode);
  const bool well_formed = WellFormed(x.offsets);
  if (x.mode == varlen::Mode::kHardened) {
    Check(built.ok() == well_formed, x, Builder::kPlain, "builders-hardened-acceptance",
          absl::StrCat("plain builder, offsets ", Show(x.offsets), ": ",
                       built.ok() ? "accepted" : built.status().ToString()));
  }
  if (!built.ok() || x.offsets.size() < 2) return;  // faithful: torch raises on an empty max
  const Expected e = PlainExpected(x.offsets);
  Check(Ints(built->cu_seqlens) == e.cu && Ints(built->seq_lens) == e.seq_lens &&
            built->max_seqlen.kind() == varlen::Value::Kind::kInt &&
            built->max_seqlen.as_int() == e.max,
        x, Builder::kPlain, "builders-plain-values",
        absl::StrCat("plain builder, offsets ", Show(x.offsets), ": cu ",
                     Show(Ints(built->cu_seqlens)), " lengths ", Show(Ints(built->seq_lens)),
                     " max ", built->max_seqlen.Repr(), "; expected cu ", Show(e.cu), " lengths ",
                     Show(e.seq_lens), " max ", e.max));
}

void CheckFlashinferCudnn(const Input& x) {
  using Builder = varlen::MetadataSpec::Builder;
  const varlen::Value cu = varlen::Value::FromTensor(
      varlen::Tensor::FromInts(x.offsets, x.dtype, varlen::Device::kCuda));
  const auto built =
      varlen::PrepareFlashinferCudnnMetadata(cu, varlen::Device::kCuda, x.elem_per_token, x.mode);
  const bool fits = WellFormed(x.offsets) && x.elem_per_token > 0 &&
                    x.offsets.back() <= kInt32Max / x.elem_per_token;
  if (x.mode == varlen::Mode::kHardened) {
    Check(
        built.ok() == fits, x, Builder::kFlashinferCudnn, "builders-hardened-acceptance",
        absl::StrCat("flashinfer_cudnn builder, offsets ", Show(x.offsets), ", elem_per_token ",
                     x.elem_per_token, ": ", built.ok() ? "accepted" : built.status().ToString()));
  }
  if (!built.ok() || x.offsets.size() < 2) return;
  const Expected e = PlainExpected(x.offsets);
  const auto batch = static_cast<int64_t>(e.seq_lens.size());
  // The buckets, from their definition: the smallest allowed value that holds.
  int64_t batch_padded = (batch + 7) / 8 * 8;
  for (int64_t b : {8, 16, 32, 64}) {
    if (b >= batch) {
      batch_padded = b;
      break;
    }
  }
  int64_t max_bucket = (e.max + 131071) / 131072 * 131072;
  for (int64_t b : {4096, 8192, 16384, 32768, 65536, 131072}) {
    if (b >= e.max) {
      max_bucket = b;
      break;
    }
  }
  std::vector<int64_t> third, lengths;
  for (int64_t i = 0; i <= batch_padded; ++i) {
    const int64_t offset = i <= batch ? e.cu[static_cast<size_t>(i)] : e.cu.back();
    third.push_back(Wrap32(offset * Wrap32(x.elem_per_token)));
  }
  for (int64_t i = 0; i < batch_padded; ++i) {
    lengths.push_back(i < batch ? e.seq_lens[static_cast<size_t>(i)] : 0);
  }
  std::vector<int64_t> indptrs = third;
  indptrs.insert(indptrs.end(), third.begin(), third.end());
  indptrs.insert(indptrs.end(), third.begin(), third.end());
  const varlen::Value& sl = built->sequence_lengths;
  const bool shaped =
      sl.is_tensor() && sl.as_tensor().shape() == varlen::Shape{batch_padded, 1, 1, 1};
  Check(Ints(built->packed_indptrs) == indptrs && Ints(sl) == lengths && shaped &&
            built->flashinfer_max_seqlen.kind() == varlen::Value::Kind::kInt &&
            built->flashinfer_max_seqlen.as_int() == max_bucket && Ints(built->cu_seqlens) == e.cu,
        x, Builder::kFlashinferCudnn, "builders-flashinfer-cudnn-values",
        absl::StrCat("offsets ", Show(x.offsets), ", elem_per_token ", x.elem_per_token,
                     ": packed_indptrs ", Show(Ints(built->packed_indptrs)), " expected ",
                     Show(indptrs), "; sequence_lengths ", Show(Ints(sl)), " expected ",
                     Show(lengths), "; bucketed max ", built->flashinfer_max_seqlen.Repr(),
                     " expected ", max_bucket));
  if (x.mode == varlen::Mode::kHardened) {
    // Proven above: nothing may have wrapped.
    Check(third.back() == x.offsets.back() * x.elem_per_token, x, Builder::kFlashinferCudnn,
          "builders-hardened-wrap",
          absl::StrCat("offsets ", Show(x.offsets), " x ", x.elem_per_token, " wrapped to ",
                       third.back()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Input x = Decode(in);
  CheckPlain(x);
  CheckFlashinferCudnn(x);
  return 0;
}
