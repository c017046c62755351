// RapidCheck properties of the contract, the reference and the case format.

#include <algorithm>
#include <numeric>

#include "gtest/gtest.h"
#include "rapidcheck/gtest.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"
#include "varlen/cases/synth.h"
#include "varlen/conformance/generators.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/seqlens.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

Tensor Offsets(const std::vector<int64_t>& lengths, DType dtype, Device device) {
  return Tensor::FromInts(OffsetsOf(lengths), dtype, device);
}

// q, k, v for `g`, filled from `seed`.
QkvTensors Data(const Geometry& g, uint64_t seed) {
  Case c;
  c.geometry = g;
  c.data.seed = seed;
  return SynthesizeQkv(c);
}

AttentionCall CallFor(const QkvTensors& qkv) {
  AttentionCall call;
  call.q = qkv.q;
  call.k = qkv.k;
  call.v = qkv.v;
  call.seq_len = qkv.q.size(0);
  return call;
}

// Resolves `call`, runs the float64 reference backend on the result and
// returns the resolved arguments and the output. Fails the property if any
// step fails.
struct Forward {
  std::string resolved;
  std::vector<double> output;
};

Forward RunForward(const AttentionCall& call, Profile profile, Mode mode) {
  const Resolution r = Resolve(call, profile, mode);
  if (!r.status.ok()) RC_FAIL(FormatPythonError(r.status));
  absl::StatusOr<KernelCall> kernel = BindForKernel(*r.args);
  if (!kernel.ok()) RC_FAIL(std::string(kernel.status().message()));
  const absl::Status bounds = CheckKernelBounds(kernel->params());
  if (!bounds.ok()) RC_FAIL(std::string(bounds.message()));
  ReferenceAttention(kernel->params(), ReferencePrecision::kFloat64);
  kernel->ApplyEpilogue();
  Forward f;
  f.resolved = ResolvedArgsToJson(*r.args).dump();
  for (int64_t i = 0; i < kernel->output().numel(); ++i)
    f.output.push_back(kernel->output().DoubleAt(i));
  return f;
}

int64_t Longest(const std::vector<int64_t>& lengths) {
  return *std::max_element(lengths.begin(), lengths.end());
}

// Builder round trip: packed indptrs / elements per token = padded cu_seqlens.
RC_GTEST_PROP(BuilderProperty, PackedIndptrsDividedByWidthArePaddedOffsets, ()) {
  const std::vector<int64_t> lengths = *GenSeqLens({.max_sequences = 80, .max_len = 300});
  const int64_t elem = *rc::gen::inRange<int64_t>(1, 4096);
  const Mode mode = *rc::gen::element(Mode::kFaithful, Mode::kHardened);
  const std::vector<int64_t> offsets = OffsetsOf(lengths);
  absl::StatusOr<VisionAttentionMetadata> m = PrepareFlashinferCudnnMetadata(
      Value::FromTensor(Offsets(lengths, DType::kInt64, Device::kCpu)), Device::kCuda, elem, mode);
  RC_ASSERT(m.ok());
  const int64_t batch = static_cast<int64_t>(lengths.size());
  const int64_t padded = PaddedBatchSize(batch);
  const std::vector<int64_t> packed = m->packed_indptrs.as_tensor().ToHostInts("test");
  RC_ASSERT(static_cast<int64_t>(packed.size()) == 3 * (padded + 1));
  for (int64_t third = 0; third < 3; ++third) {
    for (int64_t i = 0; i <= padded; ++i) {
      const int64_t token = offsets[std::min(i, batch)];
      RC_ASSERT(packed[third * (padded + 1) + i] % elem == 0);
      RC_ASSERT(packed[third * (padded + 1) + i] / elem == token);
    }
  }
  std::vector<int64_t> expected_lengths = lengths;
  expected_lengths.resize(padded, 0);
  RC_ASSERT(m->sequence_lengths.as_tensor().ToHostInts("test") == expected_lengths);
  RC_ASSERT(m->flashinfer_max_seqlen.as_int() == BucketedMaxSeqlen(Longest(lengths)));
  RC_ASSERT(m->max_seqlen.as_int() == Longest(lengths));
}

// Every well-formed way of passing one geometry resolves to the same
// arguments and gives a bitwise-identical output.
RC_GTEST_PROP(EquivalenceProperty, Fa3ArgumentFormsAgree, ()) {
  Geometry g = *GenGeometry();
  // FA3's entry takes fp16 and bf16, and head sizes that are multiples of 8.
  g.dtype = *rc::gen::element(DType::kFloat16, DType::kBFloat16);
  g.head_dim = g.head_dim_v = 8 * *rc::gen::inRange<int64_t>(1, 3);
  const QkvTensors qkv = Data(g, *rc::gen::arbitrary<uint64_t>());
  const int64_t longest = Longest(g.seq_lens);

  AttentionCall base = CallFor(qkv);
  base.cu_seqlens = Value::FromTensor(Offsets(g.seq_lens, DType::kInt32, Device::kCuda));
  base.kwargs.set("max_seqlen", Value::Int(longest));
  const Forward reference = RunForward(base, Profile::kFa3, Mode::kFaithful);

  std::vector<AttentionCall> forms;
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    for (Device device : {Device::kCpu, Device::kCuda}) {
      for (int max_form = 0; max_form < 5; ++max_form) {
        AttentionCall call = CallFor(qkv);
        call.cu_seqlens = Value::FromTensor(Offsets(g.seq_lens, dtype, device));
        const Value max[] = {
            Value::None(), Value::Int(longest), Value::Str(absl::StrCat(" ", longest)),
            Value::FromTensor(Tensor::FromInts({longest}, DType::kInt64, Device::kCuda, Shape{})),
            Value::FromTensor(Tensor::FromInts({longest}, DType::kInt32, Device::kCpu))};
        if (!max[max_form].is_none()) call.kwargs.set("max_seqlen", max[max_form]);
        forms.push_back(call);
      }
    }
  }
  AttentionCall through_layer = base;
  through_layer.entry = Entry::kLayer;
  forms.push_back(through_layer);
  AttentionCall with_metadata = CallFor(qkv);
  with_metadata.forward_metadata = *PrepareVisionAttentionMetadata(
      Value::FromTensor(Offsets(g.seq_lens, DType::kInt64, Device::kCpu)), Device::kCuda, {},
      Mode::kFaithful);
  forms.push_back(with_metadata);

  for (const AttentionCall& call : forms) {
    for (Mode mode : {Mode::kFaithful, Mode::kHardened}) {
      // Hardened mode refuses a max_seqlen spelled as a string, by design.
      if (mode == Mode::kHardened && call.kwargs.get("max_seqlen").kind() == Value::Kind::kStr)
        continue;
      const Forward f = RunForward(call, Profile::kFa3, mode);
      RC_ASSERT(f.resolved == reference.resolved);
      RC_ASSERT(f.output == reference.output);
    }
  }
}

RC_GTEST_PROP(EquivalenceProperty, FlashinferCudnnArgumentFormsAgree, ()) {
  GeometryLimits limits;
  Geometry g = *GenGeometry(limits);
  g.num_kv_heads = g.num_heads;  // one width for q, k and v: the profile's requirement
  g.head_dim_v = g.head_dim;
  const QkvTensors qkv = Data(g, *rc::gen::arbitrary<uint64_t>());
  const int64_t width = g.num_heads * g.head_dim;
  const VisionAttentionMetadata built = *PrepareFlashinferCudnnMetadata(
      Value::FromTensor(Offsets(g.seq_lens, DType::kInt32, Device::kCuda)), Device::kCuda, width,
      Mode::kFaithful);
  const int64_t bucket = built.flashinfer_max_seqlen.as_int();

  AttentionCall from_metadata = CallFor(qkv);
  from_metadata.forward_metadata = built;
  const Forward reference = RunForward(from_metadata, Profile::kFlashinferCudnn, Mode::kFaithful);

  std::vector<std::pair<AttentionCall, Mode>> forms;
  for (int max_form = 0; max_form < 4; ++max_form) {
    AttentionCall call = CallFor(qkv);
    call.cu_seqlens = built.packed_indptrs;
    call.kwargs.set("sequence_lengths", built.sequence_lengths);
    const Value max[] = {
        Value::Int(bucket), Value::Str(absl::StrCat(bucket)),
        Value::FromTensor(Tensor::FromInts({bucket}, DType::kInt64, Device::kCuda, Shape{})),
        Value::FromTensor(Tensor::FromInts({bucket}, DType::kInt32, Device::kCpu))};
    call.kwargs.set("max_seqlen", max[max_form]);
    forms.emplace_back(call, Mode::kFaithful);
    if (max[max_form].kind() != Value::Kind::kStr) forms.emplace_back(call, Mode::kHardened);
  }
  AttentionCall token_offsets = CallFor(qkv);  // hardened derives the packing itself
  token_offsets.cu_seqlens = Value::FromTensor(Offsets(g.seq_lens, DType::kInt64, Device::kCpu));
  token_offsets.kwargs.set("max_seqlen", Value::Int(bucket));
  forms.emplace_back(token_offsets, Mode::kHardened);
  forms.emplace_back(from_metadata, Mode::kHardened);

  for (const auto& [call, mode] : forms) {
    const Forward f = RunForward(call, Profile::kFlashinferCudnn, mode);
    RC_ASSERT(f.resolved == reference.resolved);
    RC_ASSERT(f.output == reference.output);
  }
}

// Hardened mode never succeeds with a max_seqlen below the longest sequence.
RC_GTEST_PROP(HardenedProperty, NeverAcceptsMaxSeqlenBelowLongest, ()) {
  Geometry g = *GenGeometry();
  g.num_kv_heads = g.num_heads;
  g.head_dim_v = g.head_dim;
  const int64_t longest = Longest(g.seq_lens);
  RC_PRE(longest > 0);
  const int64_t too_small = *rc::gen::inRange<int64_t>(0, longest);
  const Profile profile =
      *rc::gen::element(Profile::kFa3, Profile::kTritonAttn, Profile::kFlashinferCudnn);
  const QkvTensors qkv = Data(g, 0);
  AttentionCall call = CallFor(qkv);
  const Value max = *rc::gen::element(
      Value::Int(too_small),
      Value::FromTensor(Tensor::FromInts({too_small}, DType::kInt32, Device::kCuda)));
  switch (*rc::gen::inRange(0, 3)) {
    case 0:  // keyword arguments
      call.cu_seqlens = Value::FromTensor(Offsets(g.seq_lens, DType::kInt32, Device::kCuda));
      call.kwargs.set("max_seqlen", max);
      break;
    case 1: {  // hand-built metadata
      VisionAttentionMetadata m = *PrepareFlashinferCudnnMetadata(
          Value::FromTensor(Offsets(g.seq_lens, DType::kInt32, Device::kCuda)), Device::kCuda,
          g.num_heads * g.head_dim, Mode::kFaithful);
      m.max_seqlen = max;
      m.flashinfer_max_seqlen = max;
      call.forward_metadata = m;
      break;
    }
    default: {  // graph-mode list
      call.graph_mode = true;
      Tensor cu = Offsets(g.seq_lens, DType::kInt32, Device::kCuda);
      if (profile == Profile::kTritonAttn) {
        call.kwargs.set("output_ws",
                        Value::FromTensor(Tensor::Zeros(g.dtype, Device::kCuda, qkv.q.shape())));
        call.cu_seqlens = Value::List(
            {Value::FromTensor(cu),
             Value::FromTensor(Tensor::FromInts(g.seq_lens, DType::kInt32, Device::kCuda)), max});
      } else {
        call.cu_seqlens = Value::List({Value::FromTensor(cu), max});
        call.kwargs.set("sequence_lengths", Value::FromTensor(Tensor::FromInts(
                                                g.seq_lens, DType::kInt32, Device::kCuda)));
        call.kwargs.set("max_seqlen", max);
      }
    }
  }
  const Resolution r = Resolve(call, profile, Mode::kHardened);
  RC_ASSERT(!r.status.ok());
}

// Hardened mode, no guessing and no contradictions: on calls whose boundary
// arguments each describe either the ground truth or another split of the
// same tokens (at least one of them the truth), hardened mode either refuses
// the call or computes the ground truth's sequences.
RC_GTEST_PROP(HardenedProperty, SuccessMeansTheGroundTruthSequences, ()) {
  Case c;
  c.name = "generated";
  c.source = "generated";
  c.mode = Mode::kHardened;
  c.geometry = *GenGeometry({.max_sequences = 5, .max_len = 24, .max_heads = 4, .max_head_dim = 8});
  const Profile profile = *rc::gen::element(Profile::kFlashinferCudnn, Profile::kFa3,
                                            Profile::kTritonAttn, Profile::kSdpa);
  if (profile == Profile::kFlashinferCudnn && *rc::gen::inRange(0, 4) > 0) {
    c.geometry.num_kv_heads = c.geometry.num_heads;  // else refused for its heads
    c.geometry.head_dim_v = c.geometry.head_dim;
  }
  const std::vector<int64_t>& truth = c.geometry.seq_lens;
  const int64_t tokens = c.geometry.total_tokens();
  // Another split of the same tokens: two neighbours merged, or one split.
  std::vector<int64_t> other = truth;
  if (other.size() >= 2 && *rc::gen::arbitrary<bool>()) {
    other[0] += other[1];
    other.erase(other.begin() + 1);
  } else if (tokens >= 2) {
    auto it = std::find_if(other.begin(), other.end(), [](int64_t n) { return n >= 2; });
    if (it != other.end()) {
      const int64_t cut = *rc::gen::inRange<int64_t>(1, *it);
      const int64_t rest = *it - cut;
      *it = cut;
      other.insert(it + 1, rest);
    }
  }
  const int64_t width = c.geometry.num_heads * c.geometry.head_dim;
  auto split = [&](bool true_split) { return true_split ? truth : other; };
  auto offsets = [&](bool true_split) {
    return ArgLiteral::IntTensor(OffsetsOf(split(true_split)),
                                 *rc::gen::element(DType::kInt32, DType::kInt64),
                                 *rc::gen::element(Device::kCpu, Device::kCuda));
  };
  auto lengths = [&](bool true_split) {
    std::vector<int64_t> l = split(true_split);
    l.resize(l.size() + *rc::gen::inRange(0, 3), 0);  // bucket padding
    return ArgLiteral::IntTensor(l, DType::kInt32, Device::kCuda);
  };
  auto packed = [&](bool true_split) {
    std::vector<int64_t> values;
    for (int third = 0; third < 3; ++third) {
      for (int64_t offset : OffsetsOf(split(true_split))) values.push_back(offset * width);
    }
    return ArgLiteral::IntTensor(values, DType::kInt32, Device::kCuda);
  };
  // Each boundary argument describes the truth or the other split; the
  // property needs the truth in at least one (a consistently wrong call is
  // undetectable, like stale metadata).
  auto distinct = [](std::vector<int64_t> o) {
    o.erase(std::unique(o.begin(), o.end()), o.end());
    return o;
  };
  const bool other_is_truth = distinct(OffsetsOf(other)) == distinct(OffsetsOf(truth));
  bool truth_given = false;
  auto pick = [&]() {
    const bool true_split = *rc::gen::arbitrary<bool>();
    truth_given |= true_split || other_is_truth;
    return true_split;
  };
  auto given = [] { return *rc::gen::inRange(0, 3) > 0; };
  CallSpec& call = c.call;
  call.profile = profile;
  call.entry = *rc::gen::element(Entry::kDirect, Entry::kLayer);
  call.sdpa.flatten_batch = true;
  if (given()) {
    const bool true_split = pick();
    const bool as_packed = profile == Profile::kFlashinferCudnn && *rc::gen::arbitrary<bool>();
    call.cu_seqlens = as_packed ? packed(true_split) : offsets(true_split);
    if (as_packed) call.kwargs.emplace_back("sequence_lengths", lengths(true_split));
  }
  if (given() && call.kwargs.empty()) call.kwargs.emplace_back("sequence_lengths", lengths(pick()));
  if (*rc::gen::arbitrary<bool>()) {
    MetadataSpec m;
    m.builder =
        *rc::gen::element(MetadataSpec::Builder::kPlain, MetadataSpec::Builder::kFlashinferCudnn,
                          MetadataSpec::Builder::kManual);
    m.elem_per_token = width;
    m.cu_seqlens = offsets(pick());
    if (m.builder == MetadataSpec::Builder::kManual) {
      if (given()) m.seq_lens = lengths(pick());
      if (given()) {
        const bool true_split = pick();
        m.packed_indptrs = packed(true_split);
        m.sequence_lengths = lengths(true_split);
        m.flashinfer_max_seqlen = ArgLiteral::Int(BucketedMaxSeqlen(tokens));
      }
      m.max_seqlen = ArgLiteral::Int(tokens);
    }
    call.forward_metadata = m;
  }
  call.kwargs.emplace_back("max_seqlen", ArgLiteral::Int(std::max<int64_t>(tokens, 1)));
  RC_PRE(truth_given);
  RC_PRE(ValidateCase(c).ok());

  const Outcome o = RunCase(c, *FindBackend("cpu_reference"));
  RC_CLASSIFY(o.observed == Observed::kSuccess, "accepted");
  if (o.observed == Observed::kCorruption) RC_FAIL(FormatOutcomeText(c, "<generated>", o));
}

// A generated case writes to JSON and reads back unchanged.
RC_GTEST_PROP(CaseJsonProperty, RoundTripIsExact, ()) {
  const Case c = *GenCase();
  RC_ASSERT(ValidateCase(c).ok());
  const std::string text = WriteCase(c);
  absl::StatusOr<Case> back = ParseCase(text, "<generated>");
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == c);
  RC_ASSERT(WriteCase(*back) == text);
}

// Any generated case runs to a verdict on every backend without crashing,
// and a hardened resolution that succeeds is never judged against a
// reference it cannot meet because of an unchecked argument... except stale
// but self-consistent metadata, which no check can see; so only crashes and
// internal errors are asserted here.
RC_GTEST_PROP(ExecutorProperty, EveryGeneratedCaseRunsToAVerdict, ()) {
  const Case c = *GenCase();
  CaseRunner runner(c);
  for (const Backend* backend : AllBackends()) {
    const Outcome outcome = runner.Run(*backend);
    if (outcome.observed == Observed::kError) {
      RC_ASSERT(PythonErrorKindOf(outcome.error).has_value());
    }
  }
}

// vLLM's hardened mode on any generated call, SGLang's argument forms and
// corruptions included: an error, or the reference's output.
RC_GTEST_PROP(HardenedProperty, VllmNeverLetsACorruptedCallThrough, ()) {
  const Profile profile = *rc::gen::elementOf(
      std::vector<Profile>(ProfilesOf(Engine::kVllm).begin(), ProfilesOf(Engine::kVllm).end()));
  Case c = *GenCaseFor(profile);
  c.mode = Mode::kHardened;
  c.version.reset();
  c.expect.reset();
  RC_PRE(ValidateCase(c).ok());
  // The call must say where the sequences are (both None means one per
  // batch item, a split no check can dispute, as a consistently wrong call).
  const ArgLiteral& cu = c.call.cu_seqlens;
  RC_PRE(c.call.vllm_metadata.has_value() ||
         (cu.kind == ArgLiteral::Kind::kTensor && cu.tensor.ints == OffsetsOf(c.geometry.seq_lens)));
  const Outcome o = RunCase(c, *FindBackend("cpu_reference"));
  RC_CLASSIFY(o.observed == Observed::kSuccess, "accepted");
  if (o.observed == Observed::kCorruption) RC_FAIL(FormatOutcomeText(c, "<generated>", o));
  if (o.observed == Observed::kError) RC_ASSERT(PythonErrorKindOf(o.error).has_value());
}

// Permuting sequences permutes the reference output, bitwise.
RC_GTEST_PROP(ReferenceProperty, InvariantUnderSequencePermutation, ()) {
  const Geometry g = *GenGeometry();
  const QkvTensors qkv = Data(g, *rc::gen::arbitrary<uint64_t>());
  std::vector<size_t> order(g.seq_lens.size());
  std::iota(order.begin(), order.end(), 0);
  order = *rc::gen::just(order);
  std::vector<size_t> permuted_order = *rc::gen::exec([order] {
    std::vector<size_t> p = order;
    for (size_t i = p.size(); i > 1; --i) std::swap(p[i - 1], p[*rc::gen::inRange<size_t>(0, i)]);
    return p;
  });

  // Token ranges of the original sequences.
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  Geometry permuted = g;
  for (size_t i = 0; i < order.size(); ++i) permuted.seq_lens[i] = g.seq_lens[permuted_order[i]];
  auto permute_tokens = [&](const Tensor& t) {
    Tensor out = Tensor::Zeros(t.dtype(), t.device(), t.shape());
    const int64_t width = t.numel() / std::max<int64_t>(t.size(0), 1);
    int64_t to = 0;
    for (size_t s : permuted_order) {
      for (int64_t i = offsets[s] * width; i < offsets[s + 1] * width; ++i)
        out.SetDoubleAt(to++, t.DoubleAt(i));
    }
    return out;
  };
  const Reference original = ComputeReference(g, qkv.q, qkv.k, qkv.v);
  const Reference shuffled = ComputeReference(permuted, permute_tokens(qkv.q),
                                              permute_tokens(qkv.k), permute_tokens(qkv.v));
  const int64_t width = g.num_heads * g.head_dim_v;
  int64_t at = 0;
  for (size_t s : permuted_order) {
    for (int64_t i = offsets[s] * width; i < offsets[s + 1] * width; ++i, ++at) {
      RC_ASSERT(shuffled.oracle[at] == original.oracle[i]);
    }
  }
}

}  // namespace
}  // namespace varlen
