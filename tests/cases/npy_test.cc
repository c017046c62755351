// Tests the .npy writer: the header numpy.load expects, logical order for
// strided views, and bfloat16 written exactly as float32.

#include "varlen/cases/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(NpyTest, HeaderIsVersionOneAndPaddedTo64) {
  const std::string path = TempPath("varlen-npy-header.npy");
  ASSERT_TRUE(WriteNpy(path, {1.5, -2.0, 0.25}, {3}).ok());
  const std::string bytes = ReadBytes(path);
  ASSERT_GE(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string dict = bytes.substr(10, header_len);
  EXPECT_THAT(dict,
              ::testing::StartsWith("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"));
  EXPECT_EQ(dict.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header_len + 3 * sizeof(double));
  double values[3];
  std::memcpy(values, bytes.data() + 10 + header_len, sizeof values);
  EXPECT_EQ(values[0], 1.5);
  EXPECT_EQ(values[1], -2.0);
  EXPECT_EQ(values[2], 0.25);
}

TEST(NpyTest, StridedViewsAreWrittenInLogicalOrderAndBFloat16AsFloat32) {
  // A [2, 4] buffer; the view is its column 1 and 3 of each row: [[1, 3], [5, 7]].
  const Tensor buffer =
      Tensor::FromDoubles({0, 1, 2, 3, 4, 5, 6, 7}, DType::kBFloat16, Device::kCpu, Shape{2, 4});
  const Tensor view = buffer.AsStrided({2, 2}, {4, 2}, 1);
  const std::string path = TempPath("varlen-npy-view.npy");
  ASSERT_TRUE(WriteNpy(path, view).ok());
  const std::string bytes = ReadBytes(path);
  const size_t header_len = static_cast<unsigned char>(bytes[8]);
  EXPECT_THAT(bytes.substr(10, header_len), ::testing::HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(bytes.substr(10, header_len), ::testing::HasSubstr("'shape': (2, 2)"));
  float values[4];
  ASSERT_EQ(bytes.size(), 10 + header_len + sizeof values);
  std::memcpy(values, bytes.data() + 10 + header_len, sizeof values);
  EXPECT_THAT(values, ::testing::ElementsAre(1.0f, 3.0f, 5.0f, 7.0f));
}

TEST(NpyTest, UnwritablePathIsAnError) {
  const absl::Status status = WriteNpy("/nonexistent-dir/x.npy", {1.0}, {1});
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "/nonexistent-dir/x.npy: cannot write");
}

}  // namespace
}  // namespace varlen
