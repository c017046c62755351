// File: varlen/cases/case.h
// -----------------------------------------------------------------------------
//
// A Case is one complete, serializable scenario, and the only scenario format
// in the harness: property generators, fuzz decoders and corpus files all
// produce Cases, and one executor runs them (executor.h).
//
//   geometry     the ground truth: per-sequence token counts (zero allowed),
//                padding rows in no sequence, heads, head dims, dtype, the
//                attention variant (window, causal, sinks). The numerical
//                reference is computed from it and from nothing else.
//   data         a seed and a value distribution for q, k and v, or .npy
//                files that hold them.
//   call         what the caller hands the backend: calling convention,
//                entry, cu_seqlens, prepared metadata, keyword arguments, each
//                spelled as the exact Python value (ArgLiteral).
//   engine       SGLang (the default) or vLLM: whose calling convention the
//                profile is, and whose version faithful mode reproduces.
//   platform     the machine (a GPU of some capability, ROCm, NPU, XPU,
//                CPU): the engine's backend selection and constructors.
//   mode         faithful (the engine as it is, in a named version) or
//                hardened (validate everything; version-independent).
//   warmup       calls the same backend runs first, each this case with a
//                JSON merge patch applied: a caching backend has then just
//                seen a slightly different call. Their outcomes are not judged.
//   expect       what must happen: an exact error, success, or a silent
//                corruption that faithful mode reproduces.
//
// The JSON spelling is documented in corpus/README.md; case_json.h reads and
// writes it.

#ifndef VARLEN_CASES_CASE_H_
#define VARLEN_CASES_CASE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "varlen/contract/call.h"
#include "varlen/contract/platform.h"
#include "varlen/contract/variant.h"
#include "varlen/core/dtype.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"

namespace varlen {

struct Geometry {
  std::vector<int64_t> seq_lens;  // tokens per sequence, packed back to back
  int64_t num_heads = 1;
  int64_t num_kv_heads = 1;  // divides num_heads
  int64_t head_dim = 64;
  int64_t head_dim_v = 64;
  DType dtype = DType::kBFloat16;
  // The intended scale. Unset, the executor uses the default the case's
  // calling convention computes (DefaultSoftmaxScale), and scale() returns
  // 1/sqrt(head_dim).
  std::optional<double> softmax_scale;
  // What each row attends besides its whole sequence: a sliding window
  // (causal: right bound 0) and attention sinks, one logit per query head.
  AttentionVariant variant;
  // Rows of q, k and v that belong to no sequence: none (empty), or one
  // count per gap, seq_lens.size() + 1 of them: before the first sequence,
  // then after each. A CUDA-graph token budget is padding after the last
  // sequence; images padded to one length are padding after each. The
  // contract's rule for them: no kernel reads them (they hold NaN in q, k
  // and v, so a read spreads into a real row), and what a kernel writes
  // there is its own business (reported, not judged).
  std::vector<int64_t> padding;

  int64_t total_tokens() const;  // rows of q: the sequences' tokens and the padding
  int64_t padding_rows() const;
  // The row where each sequence starts, after the padding before it.
  std::vector<int64_t> SequenceStarts() const;
  int64_t longest() const;  // the longest sequence; 0 without any
  double scale() const;
  bool operator==(const Geometry&) const = default;
};

enum class Distribution {
  kNormal,               // approximately N(0, 1)
  kUniform,              // U[-1, 1)
  kSparseSmallIntegers,  // 80% zeros, else a uniform integer in [-2, 2] (so ~84% zeros)
  kLargeLogits,          // q and k scaled so logits reach about +-1e4
  kDominantLogit,        // normal, but 1 key token in 32 scaled by 8: near one-hot rows
  kConstantRows,         // normal, but half of the query tokens all zero: equal logits
  kNonFinite,            // normal, plus about two NaN, +Inf or -Inf per tensor
  kSubnormal,            // a quarter -0.0, a quarter subnormals of the dtype, else normal
};

absl::string_view DistributionName(Distribution d);
absl::StatusOr<Distribution> ParseDistribution(absl::string_view name);

// .npy files holding q, k and v (a recorded call's own values), as the case
// file names them: relative to the case file's folder, or absolute.
struct QkvFiles {
  std::string q, k, v;
  bool operator==(const QkvFiles&) const = default;
};

// q, k and v in row-major order, as SynthesizeQkv lays out drawn values.
struct QkvValues {
  std::vector<double> q, k, v;
};

struct DataSpec {
  uint64_t seed = 0;
  Distribution distribution = Distribution::kNormal;
  // Values read from files instead of drawn from the seed. LoadCaseData
  // reads them; a case parsed from text alone has the names and no values.
  std::optional<QkvFiles> files;
  std::string files_directory;                   // where relative names were read from
  std::shared_ptr<const QkvValues> file_values;  // null until read
  // The spelling, not what was read: the values follow from the files.
  bool operator==(const DataSpec& o) const {
    return seed == o.seed && distribution == o.distribution && files == o.files;
  }
};

// A tensor spelled out in a case file.
struct TensorLiteral {
  DType dtype = DType::kInt32;
  Device device = Device::kCuda;
  std::optional<Shape> shape;                         // 1-d when unset
  std::vector<int64_t> ints;                          // integer and bool dtypes
  std::vector<double> floats;                         // floating dtypes
  // > 1: the tensor is the view `base[::step]` of a zero-filled `base` with
  // `step` times as many rows, the values on every step-th row: a
  // non-contiguous tensor, as `cu_seqlens[::2]` or a column of a table is.
  int64_t step = 1;
  bool operator==(const TensorLiteral& other) const;  // NaN equals NaN
};

// The tensor a literal spells out (a fresh storage each call).
Tensor MakeTensor(const TensorLiteral& t);

// A Python value spelled out in a case file.
struct ArgLiteral {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kTensor,
    kList,
    kSingletonCache,  // optional data
    kEmptyLikeQ,      // torch.empty_like(q): an output workspace
  };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  TensorLiteral tensor;          // kTensor, or kSingletonCache's data
  bool cache_has_data = false;   // kSingletonCache
  std::vector<ArgLiteral> list;  // kList

  static ArgLiteral None() { return {}; }
  static ArgLiteral Int(int64_t v);
  static ArgLiteral Float(double v);
  static ArgLiteral Str(std::string v);
  static ArgLiteral Tensor(TensorLiteral t);
  static ArgLiteral IntTensor(std::vector<int64_t> values, DType dtype, Device device);
  // A 0-d integer tensor: torch.tensor(value, dtype=...).
  static ArgLiteral IntScalarTensor(int64_t value, DType dtype, Device device);

  bool operator==(const ArgLiteral& other) const;  // compares the fields of `kind`
};

// Prepared metadata: built by one of SGLang's builders, or by hand.
struct MetadataSpec {
  enum class Builder { kPlain, kFlashinferCudnn, kManual };
  Builder builder = Builder::kPlain;
  Device device = Device::kCuda;  // where the builders put it
  int64_t elem_per_token = 0;     // kFlashinferCudnn
  // kPlain: the builder's cu_seqlens and keyword options; kManual: the
  // dataclass fields themselves. Unset fields are None.
  ArgLiteral cu_seqlens;
  ArgLiteral seq_lens;  // kManual only
  ArgLiteral max_seqlen;
  ArgLiteral packed_indptrs;
  ArgLiteral sequence_lengths;
  ArgLiteral flashinfer_max_seqlen;
  bool operator==(const MetadataSpec&) const = default;
};

absl::string_view MetadataBuilderName(MetadataSpec::Builder builder);

enum class QLayout {
  kPacked,           // [T, H, D], contiguous
  kBatched,          // [bsz, seq_len, H, D], flattened by flashinfer_cudnn; vLLM's usual form
  kFusedQkv,         // column views of one [T, (H + 2*KV) * D] projection output,
                     // as qkv.split() makes them: token stride (H + 2*KV) * D
  kBatchedFusedQkv,  // the same views as [bsz, seq_len, H, D] (vLLM's Qwen towers)
};

// "packed", "batched", "fused_qkv", "batched_fused_qkv"
absl::string_view QLayoutName(QLayout layout);
absl::StatusOr<QLayout> ParseQLayout(absl::string_view name);
// The same layout with q, k and v as tensors of their own (one projection
// makes q, k and v with one head size).
QLayout UnfusedLayout(QLayout layout);

// vLLM: the keywords MMEncoderAttention's builders make from host token
// offsets (compute_max_seqlen, maybe_compute_seq_lens,
// maybe_recompute_cu_seqlens for the case's profile), as a model hands them
// to every block. They replace the call's cu_seqlens, max_seqlen and
// sequence_lengths.
struct VllmMetadataSpec {
  ArgLiteral cu_seqlens;               // a 1-d integer host tensor (the NumPy array)
  std::optional<int64_t> hidden_size;  // unset: num_heads * head_dim
  int64_t tp_size = 1;
  std::optional<int64_t> fp8_padded_hidden_size;
  Device device = Device::kCuda;  // where the model puts cu_seqlens and the lengths
  bool operator==(const VllmMetadataSpec&) const = default;
};

struct CallSpec {
  Profile profile = Profile::kFa3;
  Entry entry = Entry::kDirect;
  bool graph_mode = false;
  QLayout layout = QLayout::kPacked;
  // vLLM, batched layouts: q, k and v as [bsz, seq_len, H * D], the heads
  // merged into one hidden dimension (MMEncoderAttention's documented form).
  bool merged_heads = false;
  bool rotary = false;             // layer entry: rotary embeddings rebuild q and k
  // transformers' tower entry: the tower attends within windows first
  // (Qwen2.5-VL), with these config sizes; unset: per frame.
  std::optional<TowerWindows> windows;
  // Where q, k and v live; unset: where the case's platform keeps them
  // (the host on a CPU), else where the profile's engine does
  // (NativeQkvDevice: the host for a CPU backend such as amx_attn).
  std::optional<Device> qkv_device;
  std::optional<int64_t> bsz;      // 1 when unset
  std::optional<int64_t> seq_len;  // total tokens / bsz when unset
  ArgLiteral cu_seqlens;           // None when unset
  std::optional<MetadataSpec> forward_metadata;
  std::optional<VllmMetadataSpec> vllm_metadata;           // vLLM profiles only
  std::vector<std::pair<std::string, ArgLiteral>> kwargs;  // absent keys are not listed
  SdpaOptions sdpa;
  bool operator==(const CallSpec&) const = default;
};

struct Expectation {
  enum class Outcome {
    kError,             // resolution (or a builder, or a kernel entry) raises
    kSuccess,           // resolves, and the output matches the reference
    kSilentCorruption,  // resolves, and the output does not match
  };
  Outcome outcome = Outcome::kSuccess;
  PyErrorKind error_kind = PyErrorKind::kRuntimeError;  // kError
  std::string message;                                  // kError, exact
  std::optional<int> host_syncs;                        // performed by resolution
  nlohmann::ordered_json resolved;  // an object: fields the resolved arguments must have
  // The keywords passed and never read, in the order passed (Resolution::
  // unread_keywords); unset: not checked.
  std::optional<std::vector<std::string>> unread_keywords;
  bool operator==(const Expectation&) const = default;
};

absl::string_view ExpectedOutcomeName(Expectation::Outcome outcome);

// The most warmup calls one case may make.
inline constexpr int kMaxWarmupCalls = 8;

struct Case {
  // A call made on the same backend before the case's own, for bugs that
  // only show after a different call (a cache keyed on too few fields).
  struct Warmup;

  std::string name;
  std::string source;  // issue, PR or contract rule it comes from
  std::string description;
  Mode mode = Mode::kFaithful;
  // The version of the profile's engine faithful mode reproduces; unset runs
  // the latest.
  std::optional<EngineVersion> version;
  // The machine the call runs on (platform.h); unset: the one each
  // profile's kernel model was read for, where no platform rule applies.
  std::optional<Platform> platform;
  Geometry geometry;
  DataSpec data;
  CallSpec call;
  std::optional<Expectation> expect;
  std::vector<Warmup> warmup;  // in the order they run, at most kMaxWarmupCalls
  bool operator==(const Case&) const = default;

  Engine engine() const { return EngineOf(call.profile); }
  Device QkvDevice() const {
    if (call.qkv_device.has_value()) return *call.qkv_device;
    if (platform.has_value()) {
      return platform->kind == Platform::Kind::kCpu ? Device::kCpu : Device::kCuda;
    }
    return NativeQkvDevice(call.profile);
  }
  // `version`, or the latest of the engine (also when `version` is another
  // engine's, as after a change of profile).
  EngineVersion engine_version() const {
    return version.has_value() && version->engine() == engine() ? *version
                                                                : EngineVersion::Latest(engine());
  }
};

struct Case::Warmup {
  // An RFC 7386 merge patch of the case's canonical JSON (CaseToJson, with
  // "warmup" and "expect" removed), kept as written for a lossless round trip.
  nlohmann::ordered_json patch;
  // The case the patch makes (no warmup and no expectation of its own).
  Case patched;
  bool operator==(const Warmup&) const = default;
};

}  // namespace varlen

#endif  // VARLEN_CASES_CASE_H_
