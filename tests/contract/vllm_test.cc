// vLLM 0.33.0's MMEncoderAttention contract: the closed keywords, the
// custom ops' schema gate (messages as torch 2.15's dispatcher prints them,
// run through the wheel's own code), .item(), the view that misreads
// [T, H, D], the op bodies' defaults, and the encoder metadata builders'
// vectors (the reference notes' V16-V19, verified against the wheel).

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/platform.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/vllm/metadata.h"
#include "varlen/contract/vllm/version.h"

namespace varlen {
namespace {

using test::ExpectPyError;
using test::Ints;
using test::IntTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Device kCuda = Device::kCuda;
constexpr Device kCpu = Device::kCpu;

Value Scalar(int64_t v, Device device = kCpu, DType dtype = DType::kInt32) {
  return Value::FromTensor(Tensor::FromInts({v}, dtype, device, Shape{}));
}

// A vLLM call: q, k, v as [1, T, H, D] (or `shape`), the layer built for H
// heads of D.
AttentionCall VllmCall(std::vector<int64_t> lengths, int64_t heads = 2, int64_t dim = 8,
                       bool packed = false) {
  int64_t tokens = 0;
  for (int64_t l : lengths) tokens += l;
  AttentionCall call;
  const Shape shape = packed ? Shape{tokens, heads, dim} : Shape{1, tokens, heads, dim};
  call.q = Tensor::Zeros(DType::kBFloat16, kCuda, shape);
  call.k = Tensor::Zeros(DType::kBFloat16, kCuda, shape);
  call.v = Tensor::Zeros(DType::kBFloat16, kCuda, shape);
  call.vllm_layer = {.num_heads = heads, .head_size = dim, .num_kv_heads = heads, .scale = {}};
  call.cu_seqlens = Value::FromTensor(IntTensor(test::Offsets(lengths)));
  int64_t longest = 0;
  for (int64_t l : lengths) longest = std::max(longest, l);
  call.kwargs.set("max_seqlen", Scalar(longest));
  return call;
}

TEST(VllmVersionTest, NamesRoundTrip) {
  EXPECT_EQ(*ParseVllmVersion("0.33.0"), VllmVersion::k0_33_0);
  EXPECT_EQ(ParseVllmVersion("0.32.0").status().message(),
            "vLLM version \"0.32.0\" is not modelled (modelled: 0.33.0)");
}

TEST(VllmProfileTest, ProfilesArePerEngine) {
  EXPECT_EQ(ProfilesOf(Engine::kVllm).size(), 5u);
  EXPECT_EQ(ProfilesOf(Engine::kSglang).size(), 9u);
  EXPECT_EQ(*ParseProfile("FLASH_ATTN/fa2", Engine::kVllm), Profile::kVllmFlashAttnFa2);
  EXPECT_EQ(*ParseAnyProfile("vllm:TORCH_SDPA"), Profile::kVllmTorchSdpa);
  EXPECT_THAT(std::string(ParseProfile("fa3", Engine::kVllm).status().message()),
              HasSubstr("(it is sglang's: name the engine)"));
  EXPECT_EQ(QualifiedProfileName(Profile::kVllmFlashinfer), "vllm:FLASHINFER");
}

TEST(VllmResolveTest, CorrectCallReachesTheKernelWithoutASync) {
  const Resolution r = Resolve(VllmCall({5, 3}), Profile::kVllmFlashAttnFa2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const auto& args = std::get<FlashVarlenArgs>(r.args->args);
  EXPECT_EQ(args.fa_version, 2);
  EXPECT_EQ(args.max_seqlen.as_int(), 5);
  EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 5, 8));
  EXPECT_EQ(r.counts().host_syncs, 0);
  EXPECT_EQ(r.args->q.shape(), (Shape{8, 2, 8}));  // "b s ... -> (b s) ..."
  // MMEncoderAttention's scale: 1.0 / (head_size ** 0.5), not head_size ** -0.5.
  EXPECT_EQ(args.scale, 1.0 / std::pow(8.0, 0.5));
}

TEST(VllmResolveTest, KeywordsAreClosed) {
  AttentionCall call = VllmCall({4});
  call.kwargs.set("output_ws", Value::None());
  ExpectPyError(Resolve(call, Profile::kVllmTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kTypeError,
                "MMEncoderAttention.forward_cuda() got an unexpected keyword argument 'output_ws'");
}

TEST(VllmResolveTest, AnIntMaxSeqlenIsTheDispatchersError) {
  AttentionCall call = VllmCall({6, 4});
  call.kwargs.set("max_seqlen", Value::Int(6));
  ExpectPyError(
      Resolve(call, Profile::kVllmFlashAttnFa3, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
      "vllm::flash_attn_maxseqlen_wrapper() Expected a value of type 'Optional[Tensor]' for "
      "argument 'max_seqlen' but instead found type 'int'.\nPosition: 8\nValue: 6\nDeclaration: "
      "vllm::flash_attn_maxseqlen_wrapper(Tensor q, Tensor k, Tensor v, SymInt batch_size, bool "
      "is_rocm_aiter, SymInt? fa_version, float? scale=None, Tensor? cu_seqlens=None, Tensor? "
      "max_seqlen=None) -> Tensor\nCast error details: Unable to cast 6 to Tensor");
  // A str is quoted on the Value line only.
  call.kwargs.set("max_seqlen", Value::Str("4096"));
  const Resolution r = Resolve(call, Profile::kVllmTritonAttn, Mode::kFaithful);
  EXPECT_THAT(std::string(r.status.message()),
              HasSubstr("found type 'str'.\nPosition: 6\nValue: '4096'\n"));
  EXPECT_THAT(std::string(r.status.message()), HasSubstr("Unable to cast 4096 to Tensor"));
  // Hardened names the spelling vLLM needs.
  ExpectPyError(Resolve(call, Profile::kVllmTritonAttn, Mode::kHardened).status,
                PyErrorKind::kTypeError,
                "max_seqlen='4096' (str): vLLM's triton_attn_wrapper takes it as a tensor or None "
                "(its schema says Tensor?); pass torch.tensor(n, dtype=torch.int32)");
}

TEST(VllmResolveTest, ItemKeepsAFloatAndSyncsOnTheDevice) {
  AttentionCall call = VllmCall({6, 4});
  call.kwargs.set("max_seqlen",
                  Value::FromTensor(Tensor::FromDoubles({5.9}, DType::kFloat64, kCuda, Shape{})));
  const Resolution r = Resolve(call, Profile::kVllmTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(std::get<TritonArgs>(r.args->args).max_seqlen.as_float(), 5.9);
  EXPECT_EQ(r.counts().host_syncs, 1);
  call.kwargs.set("max_seqlen", Value::FromTensor(IntTensor({6, 4}, DType::kInt32, kCpu)));
  ExpectPyError(Resolve(call, Profile::kVllmTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "a Tensor with 2 elements cannot be converted to Scalar");
}

TEST(VllmResolveTest, BothOrNeitherRunsFirst) {
  AttentionCall call = VllmCall({4, 4}, 2, 8, /*packed=*/true);  // a misread q as well
  call.kwargs.erase("max_seqlen");
  ExpectPyError(Resolve(call, Profile::kVllmFlashAttnFa2, Mode::kFaithful).status,
                PyErrorKind::kAssertionError,
                "cu_seqlens and max_seqlen should be both set or both None.");
  // SDPA has no such assertion: the view fails.
  ExpectPyError(Resolve(call, Profile::kVllmTorchSdpa, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "shape '[8, 2, 2, 8]' is invalid for input of size 128");
}

TEST(VllmResolveTest, NeitherMeansUniformOffsetsAndQLen) {
  AttentionCall call = VllmCall({4, 4});
  call.cu_seqlens = Value::None();
  call.kwargs.erase("max_seqlen");
  const Resolution r = Resolve(call, Profile::kVllmFlashAttnFa3, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const auto& args = std::get<FlashVarlenArgs>(r.args->args);
  EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 8));  // one sequence: q.size(1) tokens
  EXPECT_EQ(args.max_seqlen.as_int(), 8);
  // No tokens per item: arange's step is 0.
  AttentionCall empty = VllmCall({0});
  empty.cu_seqlens = Value::None();
  empty.kwargs.erase("max_seqlen");
  ExpectPyError(Resolve(empty, Profile::kVllmTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "step must be nonzero");
}

TEST(VllmResolveTest, SdpaSplitsByTheDiffsWithTorchsMessages) {
  AttentionCall call = VllmCall({4, 6});
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 4, 10, 10, 10}));
  const Resolution r = Resolve(call, Profile::kVllmTorchSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.counts().host_syncs, 1);  // .tolist() of a device tensor (vllm#55882)
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 4, 12}));
  ExpectPyError(Resolve(call, Profile::kVllmTorchSdpa, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "split_with_sizes expects split_sizes to sum exactly to 10 (input tensor's size at "
                "dimension 1), but got split_sizes=[4, 8]");
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 6, 4, 10}));
  ExpectPyError(Resolve(call, Profile::kVllmTorchSdpa, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "split_with_sizes expects split_sizes have only non-negative entries, but got "
                "split_sizes=[6, -2, 6]");
  AttentionCall none = VllmCall({0});
  none.cu_seqlens = Value::FromTensor(IntTensor({0}));
  ExpectPyError(Resolve(none, Profile::kVllmTorchSdpa, Mode::kFaithful).status,
                PyErrorKind::kValueError, "torch.cat(): expected a non-empty list of Tensors");
}

TEST(VllmResolveTest, FlashinferAssertsBareAndChecksOnlyTheLength) {
  AttentionCall call = VllmCall({5, 3});
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 80, 128, 128}));
  ExpectPyError(Resolve(call, Profile::kVllmFlashinfer, Mode::kFaithful).status,
                PyErrorKind::kAssertionError, "");  // sequence_lengths None (vllm#42787)
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({5, 3})));
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 80, 128}));
  ExpectPyError(Resolve(call, Profile::kVllmFlashinfer, Mode::kFaithful).status,
                PyErrorKind::kAssertionError, "cu_seqlens must be divisible by 2");
  // Token offsets of even length go through (V41).
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 5, 8, 8}));
  EXPECT_TRUE(Resolve(call, Profile::kVllmFlashinfer, Mode::kFaithful).status.ok());
  EXPECT_FALSE(Resolve(call, Profile::kVllmFlashinfer, Mode::kHardened).status.ok());
}

TEST(VllmMetadataTest, BucketsAndPaddingAsTheWheelComputesThem) {
  const std::vector<std::pair<int64_t, int64_t>> buckets = {
      {-5, 1024},   {0, 1024},    {1, 1024},        {1024, 1024},     {1025, 2048},
      {4096, 4096}, {4097, 8192}, {131072, 131072}, {131073, 262144}, {300000, 393216}};
  for (const auto& [real, bucket] : buckets) EXPECT_EQ(VllmBucketedMaxSeqlen(real), bucket) << real;
  // Python's round_up does not wrap; past int64 the bucket saturates.
  EXPECT_EQ(VllmBucketedMaxSeqlen(int64_t{2147483647}), int64_t{2147483648});
  EXPECT_EQ(VllmBucketedMaxSeqlen(std::numeric_limits<int64_t>::max() - 7),
            std::numeric_limits<int64_t>::max());
}

TEST(VllmMetadataTest, FlashinferSectionsOfTheVerifiedVector) {
  const Tensor cu = IntTensor({0, 480, 1200}, DType::kInt32, kCpu);
  VllmMetadataOptions options;
  options.hidden_size = 1152;
  absl::StatusOr<VllmEncoderMetadata> m =
      PrepareVllmEncoderMetadata(Profile::kVllmFlashinfer, cu, options, kCuda, Mode::kFaithful);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(
      Ints(m->cu_seqlens),
      ElementsAre(0, 552960, 1382400, 1382400, 1382400, 1382400, 1382400, 1382400, 1382400, 0,
                  1658880, 4147200, 4147200, 4147200, 4147200, 4147200, 4147200, 4147200));
  EXPECT_THAT(Ints(m->sequence_lengths), ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(m->max_seqlen.as_tensor().dim(), 0);
  EXPECT_EQ(m->max_seqlen.as_tensor().device(), kCpu);
  EXPECT_THAT(Ints(m->max_seqlen), ElementsAre(1024));
  // tp 2 halves every offset.
  options.tp_size = 2;
  m = PrepareVllmEncoderMetadata(Profile::kVllmFlashinfer, cu, options, kCuda, Mode::kFaithful);
  EXPECT_EQ(Ints(m->cu_seqlens)[1], 552960 / 2);
  // The other backends get the offsets as they are, TORCH_SDPA a max of 0.
  m = PrepareVllmEncoderMetadata(Profile::kVllmTorchSdpa, cu, options, kCuda, Mode::kFaithful);
  EXPECT_THAT(Ints(m->cu_seqlens), ElementsAre(0, 480, 1200));
  EXPECT_THAT(Ints(m->max_seqlen), ElementsAre(0));
  EXPECT_TRUE(m->sequence_lengths.is_none());
}

TEST(VllmMetadataTest, TheVSectionWrapsInInt32First) {
  // Qwen2.5-VL's hidden 1280 at 600,000 tokens (V19).
  const Tensor cu = IntTensor({0, 600000}, DType::kInt32, kCpu);
  VllmMetadataOptions options;
  options.hidden_size = 1280;
  absl::StatusOr<VllmEncoderMetadata> m =
      PrepareVllmEncoderMetadata(Profile::kVllmFlashinfer, cu, options, kCuda, Mode::kFaithful);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Ints(m->cu_seqlens)[1], 768000000);     // q, k and o: no wrap yet
  EXPECT_EQ(Ints(m->cu_seqlens)[10], -1990967296);  // v: three times, wrapped
  const absl::StatusOr<VllmEncoderMetadata> hardened =
      PrepareVllmEncoderMetadata(Profile::kVllmFlashinfer, cu, options, kCuda, Mode::kHardened);
  ASSERT_FALSE(hardened.ok());
  EXPECT_THAT(std::string(hardened.status().message()), HasSubstr("3 * hidden_size // tp_size"));
}

// V11-V15 and V12: the profile is MMEncoderAttention's override; the
// platform class asserts it supports it, and FLASH_ATTN's version is
// get_flash_attn_version's for that capability.
TEST(VllmPlatformTest, TheOverrideMustBeOnThePlatformsList) {
  struct Refusal {
    absl::string_view platform;
    Profile profile;
    std::string message;
  };
  const Refusal refusals[] = {
      {"cpu", Profile::kVllmFlashAttnFa2,
       "Backend AttentionBackendEnum.FLASH_ATTN is not supported for vit attentionSupported "
       "backends are: [<AttentionBackendEnum.TORCH_SDPA: ''>]"},
      {"other", Profile::kVllmTritonAttn,
       "Backend AttentionBackendEnum.TRITON_ATTN is not supported for vit attentionSupported "
       "backends are: [<AttentionBackendEnum.TORCH_SDPA: ''>]"},
      {"hip:9.4", Profile::kVllmFlashinfer,
       "Backend AttentionBackendEnum.FLASHINFER is not supported for vit attention. Supported "
       "backends are: [<AttentionBackendEnum.FLASH_ATTN: "
       "'vllm.v1.attention.backends.flash_attn.FlashAttentionBackend'>, "
       "<AttentionBackendEnum.ROCM_AITER_FA: "
       "'vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend'>, "
       "<AttentionBackendEnum.TRITON_ATTN: "
       "'vllm.v1.attention.backends.triton_attn.TritonAttentionBackend'>, "
       "<AttentionBackendEnum.TORCH_SDPA: ''>]"},
      {"xpu", Profile::kVllmFlashinfer,
       "Backend AttentionBackendEnum.FLASHINFER is not supported for vit attention. Supported "
       "backends are: [<AttentionBackendEnum.FLASH_ATTN: "
       "'vllm.v1.attention.backends.flash_attn.FlashAttentionBackend'>, "
       "<AttentionBackendEnum.TRITON_ATTN: "
       "'vllm.v1.attention.backends.triton_attn.TritonAttentionBackend'>, "
       "<AttentionBackendEnum.TORCH_SDPA: ''>]."},
  };
  for (const Refusal& r : refusals) {
    AttentionCall call = VllmCall({5, 3});
    call.platform = *ParsePlatform(r.platform);
    SCOPED_TRACE(r.platform);
    ExpectPyError(Resolve(call, r.profile, Mode::kFaithful).status, PyErrorKind::kAssertionError,
                  r.message);
    ExpectPyError(Resolve(call, r.profile, Mode::kHardened).status, PyErrorKind::kAssertionError,
                  r.message);
  }
  // TORCH_SDPA is on every list, and its path is torch's wherever it runs.
  for (absl::string_view platform : {"cuda:7.5", "cuda:9.0", "hip:9.4", "xpu", "cpu", "other"}) {
    AttentionCall call = VllmCall({5, 3});
    call.platform = *ParsePlatform(platform);
    EXPECT_TRUE(Resolve(call, Profile::kVllmTorchSdpa, Mode::kFaithful).status.ok()) << platform;
  }
}

TEST(VllmPlatformTest, WhereAnotherBackendOrVersionRunsTheCaseIsNotModelled) {
  struct Run {
    absl::string_view platform;
    Profile profile;
    int64_t head_size;
    bool modelled;
  };
  const Run runs[] = {
      {"cuda:9.0", Profile::kVllmFlashAttnFa3, 64, true},
      {"cuda:9.0", Profile::kVllmFlashAttnFa2, 64, true},  // flash_attn_version=2
      {"cuda:8.0", Profile::kVllmFlashAttnFa2, 64, true},
      {"cuda:12.0", Profile::kVllmFlashAttnFa2, 64, true},
      {"cuda:8.0", Profile::kVllmFlashAttnFa3, 64, false},   // FA2 runs
      {"cuda:10.0", Profile::kVllmFlashAttnFa3, 64, false},  // FA4 or FA2 runs
      {"cuda:9.0", Profile::kVllmFlashAttnFa3, 320, false},  // upgraded to FA4
      {"cuda:7.5", Profile::kVllmFlashAttnFa2, 64, false},   // a door not read
      {"cuda:7.5", Profile::kVllmTritonAttn, 64, false},     // BLOCK 64
      {"cuda:8.6", Profile::kVllmTritonAttn, 64, true},
      {"cuda:7.5", Profile::kVllmFlashinfer, 64, true},
      {"hip:9.4", Profile::kVllmFlashAttnFa2, 64, false},  // upstream flash_attn
      {"hip:9.4", Profile::kVllmTritonAttn, 64, false},
      {"xpu", Profile::kVllmFlashAttnFa2, 64, false},
      {"npu", Profile::kVllmTorchSdpa, 64, false},  // out of tree
      {"musa:3.1", Profile::kVllmTorchSdpa, 64, false},
  };
  for (const Run& r : runs) {
    AttentionCall call = VllmCall({5, 3});
    call.vllm_layer.head_size = r.head_size;
    call.platform = *ParsePlatform(r.platform);
    const absl::Status status = Resolve(call, r.profile, Mode::kFaithful).status;
    SCOPED_TRACE(absl::StrCat(r.platform, " ", ProfileName(r.profile), " ", r.head_size));
    if (r.modelled) {
      EXPECT_NE(status.code(), absl::StatusCode::kUnimplemented) << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
      EXPECT_THAT(std::string(status.message()),
                  HasSubstr(absl::StrCat(ProfileName(r.profile), " on ", r.platform, ": ")));
    }
  }
  // XPU runs TRITON_ATTN for a float32 model whatever the override (V14):
  // the override's own assertion never runs.
  AttentionCall call = VllmCall({5, 3});
  call.q = Tensor::Zeros(DType::kFloat32, kCuda, call.q.shape());
  call.platform = *ParsePlatform("xpu");
  const absl::Status flashinfer = Resolve(call, Profile::kVllmFlashinfer, Mode::kFaithful).status;
  EXPECT_EQ(flashinfer.message(),
            "FLASHINFER on xpu: vLLM runs TRITON_ATTN instead (XPU's choice for float32, "
            "whatever the override)");
}

}  // namespace
}  // namespace varlen
