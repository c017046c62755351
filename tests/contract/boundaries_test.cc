// Hardened mode, no guessing and no contradictions: every description of the
// sequence boundaries a call carries must agree with what the kernel will
// use, even the ones faithful mode ignores; and flashinfer_cudnn never
// invents boundaries.

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/sglang/metadata.h"

namespace varlen {
namespace {

using test::ExpectPyError;
using test::IntTensor;

constexpr Device kCuda = Device::kCuda;

// 60 tokens, really [10, 20, 30].
AttentionCall Call(int64_t heads = 2, int64_t dim = 16) {
  AttentionCall call;
  for (Tensor* t : {&call.q, &call.k, &call.v}) {
    *t = Tensor::Zeros(DType::kBFloat16, kCuda, {60, heads, dim});
  }
  call.seq_len = 60;
  return call;
}

Value Lengths(std::vector<int64_t> lengths) { return Value::FromTensor(IntTensor(lengths)); }
Value Offsets(std::vector<int64_t> lengths) {
  return Value::FromTensor(IntTensor(test::Offsets(lengths)));
}

absl::Status Hardened(const AttentionCall& call, Profile profile) {
  return Resolve(call, profile, Mode::kHardened).status;
}

TEST(HardenedBoundariesTest, Fa3RefusesSequenceLengthsItWouldIgnore) {
  // Hole (a): no cu_seqlens, so fa3 would attend over one uniform sequence.
  AttentionCall call = Call();
  call.kwargs.set("sequence_lengths", Lengths({10, 20, 30}));
  call.kwargs.set("max_seqlen", Value::Int(30));
  ExpectPyError(Hardened(call, Profile::kFa3), PyErrorKind::kValueError,
                "sequence_lengths describes the sequences [10, 20, 30] but cu_seqlens=None "
                "(bsz=1 sequences of seq_len=60) describes [60]: the kernel uses the latter and "
                "ignores sequence_lengths, so every boundary argument must describe the same "
                "sequences");
  // Agreeing lengths pass, zero-length entries and bucket padding included.
  call.cu_seqlens = Offsets({10, 20, 30});
  call.kwargs.set("sequence_lengths", Lengths({10, 0, 20, 30, 0, 0, 0, 0}));
  EXPECT_TRUE(Hardened(call, Profile::kFa3).ok());
}

TEST(HardenedBoundariesTest, FlashinferNeverAssumesOneSequencePerItem) {
  // Hole (b): through the layer, nothing describes the sequences.
  AttentionCall call = Call();
  call.entry = Entry::kLayer;
  call.kwargs.set("max_seqlen", Value::Int(4096));
  ExpectPyError(Hardened(call, Profile::kFlashinferCudnn), PyErrorKind::kValueError,
                "sequence_lengths=None and cu_seqlens=None: flashinfer_cudnn needs the sequence "
                "boundaries prepared (packed metadata, sequence_lengths with packed indptrs, or "
                "token cu_seqlens); it never assumes one sequence per batch item");
  call.cu_seqlens = Offsets({10, 20, 30});  // token offsets: derived, not guessed
  EXPECT_TRUE(Hardened(call, Profile::kFlashinferCudnn).ok());
}

TEST(HardenedBoundariesTest, MetadataFieldsAProfileIgnoresMustAgree) {
  // A hand-built metadata object whose seq_lens contradict its cu_seqlens:
  // fa3 reads only cu_seqlens.
  AttentionCall call = Call();
  VisionAttentionMetadata m;
  m.cu_seqlens = Offsets({10, 20, 30});
  m.seq_lens = Lengths({30, 30});
  m.max_seqlen = Value::Int(30);
  call.forward_metadata = m;
  ExpectPyError(Hardened(call, Profile::kFa3), PyErrorKind::kValueError,
                "forward_metadata.seq_lens describes the sequences [30, 30] but "
                "forward_metadata.cu_seqlens describes [10, 20, 30]: the kernel uses the latter "
                "and ignores forward_metadata.seq_lens, so every boundary argument must describe "
                "the same sequences");
}

TEST(HardenedBoundariesTest, ArgumentsBesideFlashinferMetadataMayBeTokensOrPacked) {
  AttentionCall call = Call();
  call.forward_metadata =
      *PrepareFlashinferCudnnMetadata(Offsets({10, 20, 30}), kCuda, 32, Mode::kFaithful);
  call.cu_seqlens = Offsets({10, 20, 30});  // token offsets
  EXPECT_TRUE(Hardened(call, Profile::kFlashinferCudnn).ok());
  call.cu_seqlens = call.forward_metadata->packed_indptrs;  // the same, packed
  EXPECT_TRUE(Hardened(call, Profile::kFlashinferCudnn).ok());
  call.cu_seqlens = Offsets({30, 30});
  ExpectPyError(Hardened(call, Profile::kFlashinferCudnn), PyErrorKind::kValueError,
                "cu_seqlens describes the sequences [30, 30] but forward_metadata.packed_indptrs "
                "describes [10, 20, 30]: the kernel uses the latter and ignores cu_seqlens, so "
                "every boundary argument must describe the same sequences");
}

TEST(HardenedBoundariesTest, SdpaIgnoresMetadataButMustAgreeWithIt) {
  AttentionCall call = Call();
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = Offsets({10, 20, 30});
  call.forward_metadata =
      *PrepareVisionAttentionMetadata(Offsets({30, 30}), kCuda, {}, Mode::kFaithful);
  ExpectPyError(Hardened(call, Profile::kSdpa), PyErrorKind::kValueError,
                "forward_metadata.cu_seqlens describes the sequences [30, 30] but cu_seqlens "
                "describes [10, 20, 30]: the kernel uses the latter and ignores "
                "forward_metadata.cu_seqlens, so every boundary argument must describe the same "
                "sequences");
}

TEST(HardenedBoundariesTest, ABoundaryArgumentMustBeATensorOrNone) {
  AttentionCall call = Call();
  call.cu_seqlens = Offsets({10, 20, 30});
  call.kwargs.set("sequence_lengths", Value::Str("10,20,30"));
  ExpectPyError(Hardened(call, Profile::kFa3), PyErrorKind::kTypeError,
                "sequence_lengths='10,20,30' is a str: a sequence-boundary argument must be a "
                "tensor or None");
}

TEST(HardenedBoundariesTest, FaithfulModeStillIgnoresThem) {
  AttentionCall call = Call();
  call.kwargs.set("sequence_lengths", Lengths({10, 20, 30}));
  call.kwargs.set("max_seqlen", Value::Int(30));
  EXPECT_TRUE(Resolve(call, Profile::kFa3, Mode::kFaithful).status.ok());
}

}  // namespace
}  // namespace varlen
