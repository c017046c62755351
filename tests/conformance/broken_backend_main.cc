// A backend author's conformance binary for a broken backend (cpu_flash with
// a nan_to_num epilogue): the suite must fail it and leave a shrunk case that
// `varlen repro` replays to the same failure (tests/conformance/broken.sh).

#include "mutants.h"
#include "varlen/conformance/suite.h"

namespace {

class BrokenBackend final : public varlen::Backend {
 public:
  BrokenBackend() {
    for (varlen::Mutant& m : varlen::FlashMutants()) {
      if (m.name == "flash_nan_to_zero") mutant_ = std::move(m.backend);
    }
  }
  absl::string_view name() const override { return mutant_->name(); }
  absl::string_view description() const override { return mutant_->description(); }
  varlen::BackendCapabilities capabilities() const override { return mutant_->capabilities(); }
  absl::Status Run(const varlen::VarlenAttentionParams& p) const override {
    return mutant_->Run(p);
  }

 private:
  std::unique_ptr<varlen::Backend> mutant_;
};

}  // namespace

VARLEN_CONFORMANCE_MAIN(BrokenBackend)
