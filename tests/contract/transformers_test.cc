// transformers' vision attention contract in its three bands (4.57.6, 5.14.1,
// 5.25.0): the flash gate, the max the layer passes, the four-or-nothing
// varlen branch and its dense fallback, the split path's host syncs, the
// kernel a name loads, and hardened mode's refusals (docs/
// contract-transformers.md; the corpus cases transformers-* pin the
// messages run on the wheels).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/transformers/version.h"

namespace varlen {
namespace {

using test::ExpectPyError;
using test::Ints;
using test::IntTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr TransformersVersion k4_57 = TransformersVersion::k4_57_6;
constexpr TransformersVersion k5_14 = TransformersVersion::k5_14_1;
constexpr TransformersVersion k5_25 = TransformersVersion::k5_25_0;

// VisionAttention.forward in `version`: q, k and v the [T, H, D] projections.
AttentionCall LayerCall(std::vector<int64_t> lengths, TransformersVersion version,
                        int64_t heads = 2, int64_t dim = 16) {
  int64_t tokens = 0;
  for (int64_t l : lengths) tokens += l;
  AttentionCall call;
  call.q = Tensor::Zeros(DType::kBFloat16, Device::kCuda, {tokens, heads, dim});
  call.k = Tensor::Zeros(DType::kBFloat16, Device::kCuda, {tokens, heads, dim});
  call.v = Tensor::Zeros(DType::kBFloat16, Device::kCuda, {tokens, heads, dim});
  call.entry = Entry::kLayer;
  call.version = version;
  call.cu_seqlens = Value::FromTensor(IntTensor(test::Offsets(lengths)));
  return call;
}

// The attention interface called as the layer calls it.
AttentionCall InterfaceCall(std::vector<int64_t> lengths, int64_t max) {
  AttentionCall call = LayerCall(lengths, k5_25);
  call.entry = Entry::kDirect;
  const Value cu = call.cu_seqlens;
  call.cu_seqlens = Value::None();
  call.kwargs.set("attention_mask", Value::None());
  call.kwargs.set("scaling", Value::Float(0.25));
  call.kwargs.set("dropout", Value::Float(0.0));
  call.kwargs.set("cu_seq_lens_q", cu);
  call.kwargs.set("cu_seq_lens_k", cu);
  call.kwargs.set("max_length_q", Value::Int(max));
  call.kwargs.set("max_length_k", Value::Int(max));
  call.kwargs.set("is_causal", Value::Bool(false));
  return call;
}

const FlashVarlenArgs& Flash(const Resolution& r) {
  return std::get<FlashVarlenArgs>(r.args->args);
}

TEST(TransformersVersionTest, BandsAreData) {
  EXPECT_EQ(*ParseTransformersVersion("5.14.1"), k5_14);
  EXPECT_EQ(ParseTransformersVersion("5.24.0").status().message(),
            "transformers version \"5.24.0\" is not modelled (modelled: 4.57.6, 5.14.1, 5.25.0)");
  EXPECT_FALSE(BehaviorOf(k4_57).substring_flash_gate);
  EXPECT_FALSE(BehaviorOf(k5_14).caller_max_wins);
  EXPECT_TRUE(BehaviorOf(k5_25).sdpa_empty_segment_raises);
  EXPECT_EQ(EngineVersion::Latest(Engine::kTransformers).name(), "5.25.0");
}

TEST(TransformersProfileTest, SdpaUnqualifiedIsSglangs) {
  EXPECT_EQ(ProfilesOf(Engine::kTransformers).size(), 6u);
  EXPECT_EQ(*ParseAnyProfile("sdpa"), Profile::kSdpa);
  EXPECT_EQ(*ParseAnyProfile("transformers:sdpa"), Profile::kTfSdpa);
  EXPECT_EQ(*ParseProfile("sdpa", Engine::kTransformers), Profile::kTfSdpa);
  EXPECT_EQ(*ParseAnyProfile("kernels-community/flash-attn2"), Profile::kTfHubFlashAttn2);
  EXPECT_EQ(EngineOf(Profile::kTfEager), Engine::kTransformers);
}

TEST(TransformersLayerTest, TheMaxByBand) {
  // 5.25.0: one .item() to a Python int.
  Resolution r = Resolve(LayerCall({5, 3}, k5_25), Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 5);
  EXPECT_EQ(r.counts().host_syncs, 1);
  // 5.14.1: a 0-d tensor reaches FA2's op, which reads it for each of its
  // two int arguments.
  r = Resolve(LayerCall({5, 3}, k5_14), Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 5);
  EXPECT_EQ(r.counts().host_syncs, 2);
  // A caller's max: taken unchecked in 5.25.0, never read before.
  AttentionCall call = LayerCall({5, 3}, k5_25);
  call.kwargs.set("max_seqlen", Value::Int(2));
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 2);
  call.version = k5_14;
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 5);
  EXPECT_THAT(r.unread_keywords, ElementsAre("max_seqlen"));
}

TEST(TransformersLayerTest, FlashGateAndKernelByBand) {
  // 4.57.6: flash_attention_3 splits per image, and the name loads FA2.
  Resolution r = Resolve(LayerCall({5, 3}, k4_57), Profile::kTfFlashAttention3, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).kernel, "flash_attn_func");
  EXPECT_EQ(Flash(r).fa_version, 2);
  EXPECT_EQ(r.counts().host_syncs, 3);
  // 5.x: the substring gate; the name's own kernel.
  r = Resolve(LayerCall({5, 3}, k5_25), Profile::kTfFlashAttention3, Mode::kFaithful);
  EXPECT_EQ(Flash(r).kernel, "flash_attn_varlen_func");
  EXPECT_EQ(Flash(r).fa_version, 3);
  r = Resolve(LayerCall({5, 3}, k5_25), Profile::kTfFlashAttention4, Mode::kFaithful);
  EXPECT_EQ(Flash(r).sglang_entry, FlashVarlenArgs::SglangEntry::kFa4);
  ExpectPyError(
      Resolve(LayerCall({5, 3}, k4_57), Profile::kTfFlashAttention4, Mode::kFaithful).status,
      PyErrorKind::kKeyError, "'flash_attention_4'");
}

TEST(TransformersLayerTest, SplitPathReadsTheLengthsThreeTimes) {
  for (const Profile p : {Profile::kTfSdpa, Profile::kTfEager}) {
    const Resolution r = Resolve(LayerCall({5, 0, 3}, k5_14), p, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << r.status;
    const auto& args = std::get<SdpaArgs>(r.args->args);
    EXPECT_THAT(args.cu_seqlens, ElementsAre(0, 5, 5, 8));
    EXPECT_EQ(r.counts().host_syncs, 3);
  }
  ExpectPyError(Resolve(LayerCall({5, 0, 3}, k5_25), Profile::kTfSdpa, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "cannot reshape tensor of 0 elements into shape [1, -1, 0, 16] because the "
                "unspecified dimension size -1 can be any value and is ambiguous");
  EXPECT_TRUE(Resolve(LayerCall({5, 0, 3}, k5_25), Profile::kTfEager, Mode::kFaithful).status.ok());
}

TEST(TransformersInterfaceTest, FourOrNothing) {
  Resolution r = Resolve(InterfaceCall({5, 3}, 5), Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens), ElementsAre(0, 5, 8));
  EXPECT_EQ(Flash(r).scale, 0.25);
  EXPECT_TRUE(r.unread_keywords.empty());
  for (const char* missing : {"cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k"}) {
    AttentionCall call = InterfaceCall({5, 3}, 5);
    call.kwargs.set(missing, Value::None());
    r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << missing;
    EXPECT_EQ(Flash(r).kernel, "flash_attn_func") << missing;
    EXPECT_THAT(Ints(Flash(r).cu_seqlens), ElementsAre(0, 8)) << missing;  // the whole pack
    const Resolution hardened = Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened);
    ExpectPyError(hardened.status, PyErrorKind::kValueError,
                  absl::StrCat(missing,
                               " is None: _flash_attention_forward takes the varlen "
                               "path only when cu_seq_lens_q, cu_seq_lens_k, "
                               "max_length_q and max_length_k are all given, and "
                               "otherwise attends across every sequence of the pack "
                               "(one dense call over all 8 tokens)"));
  }
}

// The keyword wins over module.is_causal and reaches every flash kernel as
// causal=True; a value that is not a bool is not modelled.
TEST(TransformersInterfaceTest, IsCausalReachesTheKernel) {
  for (const Profile profile :
       {Profile::kTfFlashAttention2, Profile::kTfFlashAttention3, Profile::kTfFlashAttention4}) {
    AttentionCall call = InterfaceCall({5, 3}, 5);
    call.kwargs.set("is_causal", Value::Bool(true));
    Resolution r = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_TRUE(Flash(r).variant.causal()) << ProfileName(profile);
    call.kwargs.set("is_causal", Value::Bool(false));
    r = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_TRUE(Flash(r).variant.full()) << ProfileName(profile);
    call.kwargs.set("is_causal", Value::Str("yes"));
    EXPECT_TRUE(absl::IsUnimplemented(Resolve(call, profile, Mode::kFaithful).status));
  }
}

// sliding_window=w over more than w packed keys is window_size=(w-1, w-1);
// s_aux is dropped by FlashAttention 2 and 3 (and stays unread); softcap
// and FlashAttention 4's window and sinks are not modelled.
TEST(TransformersInterfaceTest, SlidingWindowAndSinks) {
  AttentionCall call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("sliding_window", Value::Int(3));
  Resolution r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).variant.window_left, 2);
  EXPECT_EQ(Flash(r).variant.window_right, 2);
  EXPECT_TRUE(
      absl::IsUnimplemented(Resolve(call, Profile::kTfFlashAttention4, Mode::kFaithful).status));
  call.kwargs.set("sliding_window", Value::Int(8));  // not below the 8 packed keys
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(Flash(r).variant.full());

  call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("s_aux", Value::FromTensor(Tensor::FromDoubles({0.5, 1.0}, DType::kBFloat16,
                                                                 Device::kCuda, Shape{2})));
  for (const Profile profile : {Profile::kTfFlashAttention2, Profile::kTfFlashAttention3}) {
    r = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_TRUE(Flash(r).variant.sinks.empty());
    EXPECT_THAT(r.unread_keywords, ElementsAre("s_aux"));
  }
  EXPECT_TRUE(
      absl::IsUnimplemented(Resolve(call, Profile::kTfFlashAttention4, Mode::kFaithful).status));
  call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("softcap", Value::Float(30.0));
  EXPECT_TRUE(
      absl::IsUnimplemented(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status));
}

TEST(TransformersInterfaceTest, RequiredArgumentsAndOtherFunctions) {
  AttentionCall call = InterfaceCall({5, 3}, 5);
  call.kwargs.erase("attention_mask");
  ExpectPyError(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status,
                PyErrorKind::kTypeError,
                "flash_attention_forward() missing 1 required positional argument: "
                "'attention_mask'");
  call.kwargs.erase("scaling");
  ExpectPyError(Resolve(call, Profile::kTfEager, Mode::kFaithful).status, PyErrorKind::kTypeError,
                "eager_attention_forward() missing 2 required positional arguments: "
                "'attention_mask' and 'scaling'");
  // SDPA called once: the varlen keywords are never read.
  const Resolution r = Resolve(InterfaceCall({5, 3}, 5), Profile::kTfSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(std::get<SdpaArgs>(r.args->args).mask, SdpaArgs::Mask::kNone);
  EXPECT_THAT(r.unread_keywords,
              ElementsAre("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k"));
  EXPECT_THAT(
      std::string(
          Resolve(InterfaceCall({5, 3}, 5), Profile::kTfSdpa, Mode::kHardened).status.message()),
      HasSubstr("cu_seq_lens_q is given to an attention function that never reads it"));
}

TEST(TransformersHardenedTest, RefusesWhatWouldGoWrong) {
  AttentionCall call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("is_causal", Value::Bool(true));
  EXPECT_THAT(
      std::string(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status.message()),
      HasSubstr("is_causal=True: vision attention is bidirectional"));
  call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("cu_seq_lens_k", Value::FromTensor(IntTensor({0, 4, 8})));
  EXPECT_THAT(
      std::string(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status.message()),
      HasSubstr("differs from cu_seq_lens_q"));
  // int64 offsets and a 0-d tensor max are made the kernel's int32 and int.
  call = InterfaceCall({5, 3}, 5);
  call.kwargs.set("cu_seq_lens_q", Value::FromTensor(IntTensor({0, 5, 8}, DType::kInt64)));
  call.kwargs.set("max_length_q",
                  Value::FromTensor(Tensor::FromInts({5}, DType::kInt32, Device::kCpu, Shape{})));
  const Resolution r = Resolve(call, Profile::kTfFlashAttention4, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).cu_seqlens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 5);
}

// The tower (Qwen3-VL) of `grid` ([images, 3] rows of t, h, w) in
// `version`: q, k and v hold the grid's frames.
AttentionCall TowerCall(std::vector<int64_t> grid, int64_t tokens, TransformersVersion version,
                        Device grid_device = Device::kCuda) {
  AttentionCall call = LayerCall({tokens}, version);
  call.entry = Entry::kTower;
  call.cu_seqlens = Value::None();
  const int64_t images = static_cast<int64_t>(grid.size() / 3);
  call.kwargs.set("grid_thw", Value::FromTensor(Tensor::FromInts(grid, DType::kInt64, grid_device,
                                                                 Shape{images, 3})));
  return call;
}

TEST(TransformersTowerTest, FramesFromTheGridByBand) {
  // An image of 4x8 patches and a video of two 2x2 frames: three segments.
  const std::vector<int64_t> grid = {1, 4, 8, 2, 2, 2};
  // 5.25.0: repeat_interleave reads its repeats twice, the tower's max once.
  Resolution r = Resolve(TowerCall(grid, 40, k5_25), Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 32, 36, 40));
  EXPECT_EQ(Flash(r).cu_seqlens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 32);
  EXPECT_EQ(r.counts().host_syncs, 3);
  // 5.14.1: no tower max; the layer's 0-d tensor, read twice by FA2's op.
  r = Resolve(TowerCall(grid, 40, k5_14), Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.counts().host_syncs, 4);
  // A grid on the host makes host offsets (which FA2's entry refuses), with
  // no sync.
  r = Resolve(TowerCall(grid, 40, k5_25, Device::kCpu), Profile::kTfFlashAttention2,
              Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).cu_seqlens.as_tensor().device(), Device::kCpu);
  EXPECT_EQ(r.counts().host_syncs, 0);
  // sdpa: no max (not a flash name), the split path's three reads.
  r = Resolve(TowerCall(grid, 40, k5_25), Profile::kTfSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.counts().host_syncs, 5);
}

TEST(TransformersTowerTest, PrecomputedValuesByBand) {
  const std::vector<int64_t> grid = {1, 4, 8, 2, 2, 2};
  // 5.x: a precomputed cu_seqlens is used as it is (two frames merged).
  AttentionCall call = TowerCall(grid, 40, k5_25);
  call.kwargs.set("cu_seqlens", Value::FromTensor(IntTensor({0, 32, 40})));
  call.kwargs.set("max_seqlen", Value::Int(8));
  Resolution r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 32, 40));
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 8);
  EXPECT_EQ(r.counts().host_syncs, 0);
  // Hardened: the precomputed offsets must be the grid's frames.
  ExpectPyError(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_seqlens is [0, 32, 40], grid_thw's frames are [0, 32, 36, 40]: a "
                "precomputed cu_seqlens must be the tower's own");
  // 4.57.6 passes it beside its own: Python's TypeError quotes the block.
  call.version = k4_57;
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnimplemented);
  // A grid the tower's earlier steps would refuse is not modelled; hardened
  // names it.
  call = TowerCall({1, 0, 8}, 40, k5_25);
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status.code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(
      std::string(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status.message()),
      HasSubstr("image 0 has t, h, w = 1, 0, 8; each must be at least 1"));
  EXPECT_THAT(
      std::string(Resolve(TowerCall(grid, 41, k5_25), Profile::kTfFlashAttention2, Mode::kHardened)
                      .status.message()),
      HasSubstr("its frames hold 40 tokens, q holds 41"));
}

TEST(TransformersTowerTest, WindowsFromTheGridByBand) {
  // Qwen2.5-VL's config (windows of 4 x 4 merged cells of 2 x 2 patches): a
  // video of two 8 x 12 frames (4 x 6 cells each) and a 4 x 4 image.
  const std::vector<int64_t> grid = {2, 8, 12, 1, 4, 4};
  AttentionCall call = TowerCall(grid, 208, k5_25);
  call.tower_windows = TowerWindows{};
  Resolution r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  // Per frame a 4 x 4 and a 4 x 2 window (the padded row and column of
  // empty windows dropped by unique_consecutive), then the image's 2 x 2.
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 64, 96, 160, 192, 208));
  EXPECT_EQ(Flash(r).cu_seqlens.as_tensor().device(), Device::kCuda);
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 64);
  // The frames' two repeat_interleave reads and max, grid_thw.tolist(),
  // unique_consecutive's length and the windows' max.
  EXPECT_EQ(r.counts().host_syncs, 6);
  EXPECT_EQ(r.counts().host_to_device_copies, 1);
  // A window wider than every frame: one window per frame.
  call.tower_windows = TowerWindows{.window_size = 1000};
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 96, 192, 208));
  // 4.57.6 on a host grid: the offsets on q's device; on a device grid its
  // 0-d reads are not modelled.
  call.tower_windows = TowerWindows{};
  call = TowerCall(grid, 208, k4_57, Device::kCpu);
  call.tower_windows = TowerWindows{};
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flash(r).cu_seqlens.as_tensor().device(), Device::kCuda);
  call = TowerCall(grid, 208, k4_57);
  call.tower_windows = TowerWindows{};
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status.code(),
            absl::StatusCode::kUnimplemented);
  // Frames that are not whole merged cells fail in the tower before
  // attention: not modelled; hardened names the rule.
  call = TowerCall({1, 3, 4}, 12, k5_25);
  call.tower_windows = TowerWindows{};
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status.code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(
      std::string(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status.message()),
      HasSubstr("image 0 has h, w = 3, 4; each must be a multiple of spatial_merge_size 2"));
}

TEST(TransformersTowerTest, PrecomputedWindowsByBand) {
  const std::vector<int64_t> grid = {1, 8, 12};
  AttentionCall call = TowerCall(grid, 96, k5_25);
  call.tower_windows = TowerWindows{};
  // Alone, cu_window_seqlens is popped and dropped: the windows are the grid's.
  call.kwargs.set("cu_window_seqlens", Value::FromTensor(IntTensor({0, 96})));
  Resolution r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 64, 96));
  ExpectPyError(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_window_seqlens is given without window_index: the tower takes the two "
                "together or recomputes both, dropping the one given");
  // With window_index, both are used as given, and the windows' max is
  // the caller's when given.
  std::vector<int64_t> cells(24);
  for (int64_t i = 0; i < 24; ++i) cells[static_cast<size_t>(i)] = i;
  call.kwargs.set("window_index",
                  Value::FromTensor(Tensor::FromInts(cells, DType::kInt64, Device::kCuda)));
  call.kwargs.set("max_window_seqlen", Value::Int(50));
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 96));
  EXPECT_EQ(Flash(r).max_seqlen.as_int(), 50);
  EXPECT_THAT(
      std::string(Resolve(call, Profile::kTfFlashAttention2, Mode::kHardened).status.message()),
      HasSubstr("a precomputed window_index must be the tower's own (24 merged cells in window "
                "order)"));
  // 5.14.1 pops the pair but not max_window_seqlen, which reaches the block.
  call.version = k5_14;
  r = Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(Ints(Flash(r).cu_seqlens.as_tensor()), ElementsAre(0, 96));
}

// A function a user registers in AttentionInterface, as the layer calls it.
TEST(TransformersFunctionTest, TheLayerCallsItOnceOverThePackOrOncePerImage) {
  // 5.14.1, a flash name: one call, the max a 0-d tensor, the caller's
  // max_seqlen passed on in **kwargs.
  AttentionCall call = LayerCall({3, 0, 5}, k5_14);
  call.kwargs.set("max_seqlen", Value::Int(99));
  absl::StatusOr<FunctionCalls> flash = FunctionCallsOf(call, Profile::kTfHubFlashAttn2);
  ASSERT_TRUE(flash.ok()) << flash.status();
  ASSERT_EQ(flash->calls.size(), 1u);
  const Kwargs& kw = flash->calls[0].call.kwargs;
  ASSERT_TRUE(kw.get("max_length_q").is_tensor());
  EXPECT_EQ(kw.get("max_length_q").as_tensor().dim(), 0);
  EXPECT_EQ(kw.get("max_seqlen").as_int(), 99);
  EXPECT_THAT(flash->calls[0].sequences, ElementsAre(3, 0, 5));
  EXPECT_EQ(flash->calls[0].scale, 0.25);
  EXPECT_TRUE(flash->ambiguous.empty()) << flash->ambiguous;
  EXPECT_EQ(flash->module.get("num_key_value_groups").as_int(), 1);

  // 4.57.6 gates on flash_attention_2 alone: the same name splits per image,
  // each call a token view of q without varlen keywords.
  call.version = k4_57;
  absl::StatusOr<FunctionCalls> split = FunctionCallsOf(call, Profile::kTfHubFlashAttn2);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->calls.size(), 3u);
  EXPECT_EQ(split->calls[2].call.q.size(0), 5);
  // torch.split's view: the third image starts at token 3 (2 bytes an element).
  EXPECT_EQ(static_cast<const char*>(split->calls[2].call.q.data<void>()) -
                static_cast<const char*>(call.q.data<void>()),
            3 * 2 * 16 * 2);
  EXPECT_FALSE(split->calls[0].call.kwargs.contains("cu_seq_lens_q"));
  EXPECT_FALSE(split->calls[0].unpacks_result);
  EXPECT_THAT(split->calls[2].sequences, ElementsAre(5));
  EXPECT_TRUE(split->module.get("num_key_value_groups").is_none());
}

TEST(TransformersFunctionTest, WhatAsksNoSingleAttentionIsSaid) {
  // 5.25.0 passes a caller's max on unchecked.
  AttentionCall call = LayerCall({3, 5}, k5_25);
  call.kwargs.set("max_seqlen", Value::Int(4));
  absl::StatusOr<FunctionCalls> small = FunctionCallsOf(call, Profile::kTfFlashAttention2);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_THAT(small->ambiguous, HasSubstr("max_length_q"));
  // A direct caller's partial set of varlen keywords.
  AttentionCall direct = InterfaceCall({3, 5}, 5);
  direct.kwargs.erase("max_length_k");
  absl::StatusOr<FunctionCalls> partial = FunctionCallsOf(direct, Profile::kTfFlashAttention2);
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ(partial->ambiguous, "some of cu_seq_lens_q/k and max_length_q/k, not all four");
  // The layer's own error comes before any call.
  AttentionCall none = LayerCall({3, 5}, k5_25);
  none.cu_seqlens = Value::None();
  ExpectPyError(FunctionCallsOf(none, Profile::kTfSdpa).status(), PyErrorKind::kTypeError,
                "'NoneType' object is not subscriptable");
  EXPECT_FALSE(CallsFunctions(Profile::kFa3));
}

}  // namespace
}  // namespace varlen
