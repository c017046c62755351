#include "varlen/run/shard.h"

#include <cstdlib>
#include <fstream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace varlen {
namespace {

// A GoogleTest sharding variable as a number, or why not.
absl::StatusOr<std::optional<int>> ShardVariable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::optional<int>();
  int number = 0;
  if (!absl::SimpleAtoi(value, &number)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=\"", value, "\" is not a whole number"));
  }
  return std::optional<int>(number);
}

}  // namespace

absl::StatusOr<Shard> ShardFromEnvironment() {
  absl::StatusOr<std::optional<int>> total = ShardVariable("GTEST_TOTAL_SHARDS");
  if (!total.ok()) return total.status();
  absl::StatusOr<std::optional<int>> index = ShardVariable("GTEST_SHARD_INDEX");
  if (!index.ok()) return index.status();
  if (!total->has_value() && !index->has_value()) return Shard{};
  if (!total->has_value() || !index->has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX are set together or not at all; only ",
        total->has_value() ? "GTEST_TOTAL_SHARDS" : "GTEST_SHARD_INDEX", " is set"));
  }
  const Shard shard{**index, **total};
  if (shard.total < 1 || shard.index < 0 || shard.index >= shard.total) {
    return absl::InvalidArgumentError(
        absl::StrCat("GTEST_SHARD_INDEX=", shard.index, " with GTEST_TOTAL_SHARDS=", shard.total,
                     ": the total must be at least 1 and the index in [0, total)"));
  }
  // A runner that shards says so by touching this file, as GoogleTest does.
  if (const char* status_file = std::getenv("GTEST_SHARD_STATUS_FILE")) {
    std::ofstream touched(status_file, std::ios::app);
  }
  return shard;
}

}  // namespace varlen
