// Small helpers shared by the unit tests: integer tensors in and out, and the
// one way every test checks an error (its Python kind and exact message).

#ifndef VARLEN_TESTS_SUPPORT_TEST_UTIL_H_
#define VARLEN_TESTS_SUPPORT_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen::test {

// Every element of `t`, read device-side (records nothing in the ledger).
inline std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.IntAt(i));
  return out;
}
inline std::vector<int64_t> Ints(const Value& v) { return Ints(v.as_tensor()); }

inline Tensor IntTensor(const std::vector<int64_t>& values, DType dtype = DType::kInt32,
                        Device device = Device::kCuda) {
  return Tensor::FromInts(values, dtype, device);
}

// The token offsets [0, l0, l0+l1, ...] of `lengths`.
inline std::vector<int64_t> Offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> offsets = {0};
  for (int64_t length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

inline void ExpectPyError(const absl::Status& status, PyErrorKind kind,
                          const std::string& message) {
  ASSERT_FALSE(status.ok()) << "expected " << PyErrorKindName(kind) << ": " << message;
  EXPECT_EQ(PythonErrorKindOf(status), kind) << FormatPythonError(status);
  EXPECT_EQ(status.message(), message);
}

template <typename T>
void ExpectPyError(const absl::StatusOr<T>& result, PyErrorKind kind, const std::string& message) {
  ExpectPyError(result.status(), kind, message);
}

}  // namespace varlen::test

#endif  // VARLEN_TESTS_SUPPORT_TEST_UTIL_H_
