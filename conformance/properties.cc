#include "properties.h"

namespace varlen::internal {

constexpr Property kProperties[] = {
    {"Numerics", CheckNumerics, true},
    {"SystematicError", CheckSystematicError, false},
    {"ArgumentForms", CheckArgumentForms, false},
    {"GraphSafety", CheckGraphSafety, false},
    {"NoSilentCorruption", CheckNoSilentCorruption, false},
    {"PoisonedNeighbours", CheckPoisonedNeighbours, false},
    {"SequencePermutation", CheckSequencePermutation, false},
    {"SequenceAlone", CheckSequenceAlone, false},
    {"SplitJoin", CheckSplitJoin, false},
    {"LogitShift", CheckLogitShift, false},
    {"GqaRepeatedKv", CheckGqaRepeatedKv, false},
    // Last: a property's long cases take their seed from its place here.
    {"AttentionVariants", CheckAttentionVariants, false},
    {"PaddingRows", CheckPaddingRows, false},
};

absl::Span<const Property> Properties() { return kProperties; }

const Property* FindProperty(absl::string_view name) {
  for (const Property& property : kProperties) {
    if (property.name == name) return &property;
  }
  return nullptr;
}

}  // namespace varlen::internal
