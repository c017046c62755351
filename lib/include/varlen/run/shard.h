// File: varlen/run/shard.h
// -----------------------------------------------------------------------------
//
// One machine's part of a run split across several, named as GoogleTest
// names its shards (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX), so that a CI
// matrix, a SLURM array or an indexed Kubernetes job splits a run with no
// scheduler of ours. A run numbers its units of work (a case on a backend,
// a property on a backend) in a fixed order; a shard takes those whose
// number leaves its index when divided by the total.

#ifndef VARLEN_RUN_SHARD_H_
#define VARLEN_RUN_SHARD_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace varlen {

struct Shard {
  int index = 0;
  int total = 1;

  bool Owns(int64_t ordinal) const { return ordinal % total == index; }
};

// The shard GoogleTest's variables name (neither set: the whole run),
// touching GTEST_SHARD_STATUS_FILE as a runner that shards must.
// InvalidArgument names the variable, its value and the rule.
absl::StatusOr<Shard> ShardFromEnvironment();

}  // namespace varlen

#endif  // VARLEN_RUN_SHARD_H_
