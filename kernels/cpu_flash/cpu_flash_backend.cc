// FlashAttention-2 on the CPU as a backend under test: the algorithm of the
// GPU kernels (tiles, online softmax in float32, probabilities rounded to the
// input dtype before P V), on every core.

#include "flash_attention.h"
#include "varlen/backend/backend.h"

namespace varlen {
namespace {

class CpuFlashBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cpu_flash"; }
  absl::string_view description() const override {
    return "FlashAttention-2 on the CPU: 64x64 tiles, online softmax in float32, P rounded to "
           "the input dtype before P*V, all cores";
  }
  BackendCapabilities capabilities() const override { return FlashCapabilities(); }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    FlashAttention(params);
    return absl::OkStatus();
  }
};

}  // namespace
}  // namespace varlen

VARLEN_BACKEND(cpu_flash, ::varlen::CpuFlashBackend)
