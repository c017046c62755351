// Internal: each engine's entry, one resolver per calling convention, and
// what they share. Resolve() (resolve.cc) hands a call to its engine's entry
// (the EngineModel's hooks, defined in the engine's folder), which builds
// the ResolveContext and dispatches to the profile's resolver.

#ifndef VARLEN_LIB_CONTRACT_RESOLVE_INTERNAL_H_
#define VARLEN_LIB_CONTRACT_RESOLVE_INTERNAL_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "varlen/contract/call.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/seqlens.h"
#include "varlen/contract/sglang/version.h"

namespace varlen::internal {

// A callee's **kwargs that records the keys it looks up: a key never looked
// up was received and never read (it changes nothing).
class LookedUpKwargs {
 public:
  explicit LookedUpKwargs(Kwargs kwargs) : kwargs_(std::move(kwargs)) {}

  Value get(absl::string_view key) const { return Mark(key), kwargs_.get(key); }
  const Value* find(absl::string_view key) const { return Mark(key), kwargs_.find(key); }
  bool contains(absl::string_view key) const { return Mark(key), kwargs_.contains(key); }
  // The value of a keyword the code handles and then drops, which therefore
  // stays among the unread (a keyword with no effect is what that list is
  // for).
  Value Peek(absl::string_view key) const { return kwargs_.get(key); }

  // The keys given and never looked up, in the order given.
  std::vector<std::string> NeverLookedUp() const;

 private:
  void Mark(absl::string_view key) const { looked_up_.insert(std::string(key)); }

  Kwargs kwargs_;
  mutable std::set<std::string> looked_up_;
};

struct ResolveContext {
  const AttentionCall& call;  // as the backend receives it (after the layer)
  LookedUpKwargs kwargs;      // what the backend's **kwargs hold (the layer fills keys)
  Mode mode;
  const SglangBehavior& sglang;  // the modelled version's (the latest in hardened mode)
  std::vector<std::string>* notes;

  bool hardened() const { return mode == Mode::kHardened; }
  void Note(std::string note) const { notes->push_back(std::move(note)); }
};

// The engines' entries, as their EngineModels hand them to Resolve(),
// BackendCallOf() and DefaultSoftmaxScale().
absl::StatusOr<ResolvedArgs> ResolveSglangCall(const AttentionCall& call, Profile profile,
                                               Mode mode, Resolution* record);
AttentionCall SglangBackendCall(const AttentionCall& call, Profile profile);
double SglangDefaultSoftmaxScale(Profile profile, int64_t head_dim);
// call.platform's rules (sglang/platform.h), then whether the profile's
// kernel was read for that platform.
absl::Status SglangCheckPlatform(const AttentionCall& call, Profile profile, Mode mode);
absl::Status VllmCheckPlatform(const AttentionCall& call, Profile profile, Mode mode);
absl::StatusOr<ResolvedArgs> ResolveVllmCall(const AttentionCall& call, Profile profile, Mode mode,
                                             Resolution* record);
AttentionCall VllmBackendCall(const AttentionCall& call, Profile profile);
double VllmDefaultSoftmaxScale(Profile profile, int64_t head_dim);

absl::StatusOr<ResolvedArgs> ResolveTransformersCall(const AttentionCall& call, Profile profile,
                                                     Mode mode, Resolution* record);
AttentionCall TransformersBackendCall(const AttentionCall& call, Profile profile);
absl::StatusOr<FunctionCalls> TransformersFunctionCalls(const AttentionCall& call, Profile profile);
// Whether the profile's kernel was read for call.platform (transformers/platform.cc).
absl::Status TransformersCheckPlatform(const AttentionCall& call, Profile profile, Mode mode);
double TransformersDefaultSoftmaxScale(Profile profile, int64_t head_dim);

absl::StatusOr<FlashinferCudnnArgs> ResolveFlashinferCudnn(const ResolveContext& ctx);
// fa3, fa4, aiter_attn, amx_attn and xpu_attn.
absl::StatusOr<FlashVarlenArgs> ResolveFlashVarlen(const ResolveContext& ctx, Profile profile);
absl::StatusOr<AscendArgs> ResolveAscend(const ResolveContext& ctx);
absl::StatusOr<TritonArgs> ResolveTriton(const ResolveContext& ctx);
absl::StatusOr<SdpaArgs> ResolveSdpa(const ResolveContext& ctx);
// window_size at full attention's value, the layer's default: None or
// (-1, -1).
bool IsFullAttentionWindow(const Value& window_size);

// softmax_scale as `profile`'s kernel reads it: None -> the default that
// profile's code computes (DefaultSoftmaxScale), an int or float as is.
// Hardened mode also requires a finite value, and refuses anything else.
// Faithful mode hands anything else to the kernel, whose response is not
// modelled (Unimplemented). Resolvers call this last, where SGLang calls
// the kernel.
absl::StatusOr<double> ResolveSoftmaxScale(const ResolveContext& ctx, Profile profile);

// ResolveSoftmaxScale for a kernel that takes the scale at its entry, in its
// own order: a non-number's "not modelled" goes to `not_modelled` for the
// binding to return where the kernel reads the scale; other errors return.
absl::Status ResolveKernelScale(const ResolveContext& ctx, Profile profile, double& scale,
                                absl::Status& not_modelled);

// (cu[1:] - cu[:-1]).tolist() as torch.split's sizes, read `reads` times
// (each read labelled `what`): a multi-dimensional or floating cu gives
// split's TypeError.
absl::StatusOr<std::vector<int64_t>> SplitSizesOf(const Tensor& cu, int reads,
                                                  absl::string_view what);

// torch.split(x, lens, dim=`dim`)'s checks on sizes read from cu_seqlens
// (`dim_size`: x's size there), then torch.cat's of the chunks.
absl::Status CheckSplitSizes(const std::vector<int64_t>& lens, int64_t dim_size, int dim);

// Attention per chunk of `lens` tokens, within each of `bsz` items, as the
// SDPA binding runs it: one block per chunk (no lens: each item whole).
SdpaArgs ChunkedSdpa(const std::vector<int64_t>& lens, int64_t bsz, int64_t tokens_per_item,
                     double scale);

// Hardened: q, k and v are [T, H, D] (or [b, s, H, D] where `allow_4d`),
// agree on tokens, and GQA divides evenly; they are contiguous unless the
// kernel reads explicit strides (`allow_strided`: any token and head
// stride, a unit stride along head_dim). Returns T.
struct QkvLayoutRule {
  bool allow_4d = false;
  bool allow_strided = false;
};
absl::StatusOr<int64_t> CheckQkvShapes(const AttentionCall& call, QkvLayoutRule rule);

// Hardened: a metadata object's `field` must be a tensor.
absl::StatusOr<Tensor> RequireTensorField(const Value& value, absl::string_view field);

// Hardened: token cu_seqlens after validation, as the kernel will get them
// (int32 on q's device), with the host offsets read to validate them.
struct CheckedCuSeqlens {
  Tensor cu;                     // int32 on q's device
  std::vector<int64_t> offsets;  // read on the host, or the stamp's copy
  Longest longest;
};

// Validates `cu` (named `name`) against q's `tokens`. When `may_cast` is
// false (graph mode: the captured kernel reads the buffer as it is), `cu`
// must already be int32 on q's device.
absl::StatusOr<CheckedCuSeqlens> CheckCuSeqlensForKernel(const ResolveContext& ctx,
                                                         const Tensor& cu, absl::string_view name,
                                                         int64_t tokens, bool may_cast);

// Hardened: the cu_seqlens of prepared metadata. A hardened builder's stamp
// is checked against q on the host (no sync); anything else is validated.
absl::StatusOr<CheckedCuSeqlens> CheckMetadataCuSeqlens(const ResolveContext& ctx,
                                                        const VisionAttentionMetadata& metadata,
                                                        int64_t tokens);

// Hardened, for the token-offset conventions (the flash_attn_varlen_func
// family, triton_attn): where cu_seqlens and max_seqlen come from (prepared
// metadata, a list laid out as `rules.list_layout` with cu_seqlens first and
// max_seqlen last, or the keyword arguments), with cu_seqlens validated
// against q's `tokens`.
struct TokenSourceRules {
  bool reads_metadata = true;            // else metadata is only checked to agree
  std::vector<std::string> list_layout;  // empty: a list cu_seqlens is never read
  bool list_anytime = false;             // a list is read outside graph mode too
};
struct TokenSource {
  enum class Kind { kMetadata, kGraphList, kKwargs };
  Kind kind = Kind::kKwargs;
  CheckedCuSeqlens checked;
  std::string name;      // where the offsets came from, for messages
  unsigned unused = 0;   // BoundarySources this path ignores (the caller may use some)
  Value max_seqlen;      // None only on the kwargs path (then derived)
  std::string max_name;  // how the caller spelled it, for messages
};
absl::StatusOr<TokenSource> ResolveHardenedTokenSource(const ResolveContext& ctx, int64_t tokens,
                                                       const TokenSourceRules& rules);

// Hardened: an explicit max_seqlen checked against the longest sequence, or
// the longest sequence itself when none is given.
absl::StatusOr<int64_t> CheckOrDeriveMaxSeqlen(const ResolveContext& ctx, const Value& max_seqlen,
                                               const Longest& longest, absl::string_view name);

// The longest sequence of validated token offsets, described by the
// offsets that bound it ("cu_seqlens[2] - cu_seqlens[1]").
Longest LongestOfOffsets(const std::vector<int64_t>& offsets, absl::string_view name);

// How messages name the token offsets resolve_seqlens takes from `call`:
// "cu_seqlens", or the uniform default with its bsz and seq_len.
std::string UniformOffsetsName(const AttentionCall& call);

// Hardened resolve_seqlens: the same sources (a tensor, a SingletonCache, or
// None for uniform offsets from bsz and seq_len), with a TypeError that names
// the value for anything else, and all-zero offsets for an empty batch where
// SGLang's arange(0, 0, step=0) raises.
absl::StatusOr<Tensor> HardenedResolveSeqlens(const ResolveContext& ctx);

// Faithful: SGLang's graph-mode list check (fa3 and triton_attn raise the
// same RuntimeError).
absl::Status CheckSglangGraphList(const Value& cu_seqlens);

// Hardened: where a call describes sequence boundaries, other than the one
// resolution used. Faithful mode ignores them; hardened mode requires them to
// agree with what the kernel computes.
enum BoundarySource : unsigned {
  kCuSeqlensArgument = 1u << 0,  // the cu_seqlens argument (token offsets, or
                                 // packed indptrs for flashinfer_cudnn)
  kSequenceLengthsKwarg = 1u << 1,
  kMetadataCuSeqlens = 1u << 2,
  kMetadataSeqLens = 1u << 3,
  kMetadataPackedIndptrs = 1u << 4,
  kMetadataSequenceLengths = 1u << 5,
};

// Hardened: every source in `unused` that the caller gave (not None) must
// describe the same sequences as `offsets`, the validated token offsets the
// kernel will use (described as `used` in messages). Two descriptions agree
// when they split the tokens into the same non-empty sequences, so
// zero-length entries and bucket padding change nothing. Reads device
// tensors on the host.
absl::Status CheckUnusedBoundariesAgree(const ResolveContext& ctx,
                                        const std::vector<int64_t>& offsets, absl::string_view used,
                                        unsigned unused);

// Hardened: the graph-mode list check, naming the value and the layout.
absl::Status CheckGraphModeList(const Value& cu_seqlens, absl::string_view layout);

// VisionAscendAttention from `seq_len_arg.tolist()` on: `ends` is that list
// and `rows` q's rows. 0.5.23 drops per-image padding (fewer real tokens than
// rows); the fused kernel then requires the last end to equal the rows it is
// given, else RuntimeError("queryT(T) must be equal to the last element of
// actualSequenceLengthQ(end)").
absl::StatusOr<AscendArgs> AscendLaunch(std::vector<int64_t> ends, int64_t rows,
                                        const SglangBehavior& sglang);

// Python's `lst[i]` on a graph-mode list.
absl::StatusOr<Value> ListItem(const Value& list, size_t index);

}  // namespace varlen::internal

#endif  // VARLEN_LIB_CONTRACT_RESOLVE_INTERNAL_H_
