// Tests the .npy writer (the header numpy.load expects, logical order for
// strided views, bfloat16 written exactly as float32) and the reader (what
// numpy.save writes, and a clear error for anything else, never a crash).

#include "varlen/cases/npy.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
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

// A .npy file of `descr`, `shape_text` and `data`, version 1.0 or 2.0.
std::string NpyBytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const size_t length = dict.size();
  header += static_cast<char>(length & 0xff);
  header += static_cast<char>((length >> 8) & 0xff);
  if (major > 1) header += std::string(2, '\0');
  return header + dict + data;
}

std::string Float32Bytes(std::initializer_list<float> values) {
  std::string bytes;
  for (float v : values) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  return bytes;
}

TEST(NpyTest, ReadsWhatItWritesInEveryFloatingDtype) {
  // Values every dtype holds exactly (65280 is near float16's largest).
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const Tensor t = Tensor::FromDoubles({1.5, -2.0, 0.25, 65280.0, -0.0, 3.0}, dtype, Device::kCpu,
                                         Shape{2, 3});
    const std::string path = TempPath("varlen-npy-round-trip.npy");
    ASSERT_TRUE(WriteNpy(path, t).ok());
    absl::StatusOr<NpyArray> array = ReadNpy(path, 1 << 20);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->shape, (Shape{2, 3}));
    EXPECT_THAT(array->values, ::testing::ElementsAre(1.5, -2.0, 0.25, 65280.0, -0.0, 3.0));
    EXPECT_TRUE(std::signbit(array->values[4]));
  }
}

TEST(NpyTest, ReadsVersionTwoDoubleQuotesAndZeroDimensions) {
  absl::StatusOr<NpyArray> array =
      ParseNpy(NpyBytes("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,2),}\n",
                        Float32Bytes({7.0f, -1.0f}), 2),
               "x.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, (Shape{1, 2}));
  EXPECT_THAT(array->values, ::testing::ElementsAre(7.0, -1.0));
  array = ParseNpy(
      NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0')),
      "scalar.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_TRUE(array->shape.empty());
  array = ParseNpy(NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }", ""),
                   "empty.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_TRUE(array->values.empty());
}

TEST(NpyTest, RefusesWhatItDoesNotReadByName) {
  const std::string two = Float32Bytes({1.0f, 2.0f});
  const struct {
    std::string bytes;
    std::string message;
  } cases[] = {
      {"PK\x03\x04 not an array", "x.npy: not a .npy file"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two, 4),
       "x.npy: .npy format version 4.0 is not one of 1.0, 2.0 and 3.0"},
      {NpyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
       "x.npy: 'descr' is '<i8': q, k and v are read from little-endian float16, float32 or "
       "float64 arrays"},
      {NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two),
       "'descr' is '>f4'"},
      {NpyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two),
       "'descr' is not a string: structured arrays are not read"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two),
       "'fortran_order' is True: save a C-ordered array"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", two),
       "'shape' (3) of '<f4' needs 12 bytes of data; the file holds 8"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two),
       "'shape' holds something other than non-negative integers"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627777,), }", two),
       "a dimension of 'shape' exceeds 1099511627776"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 2), }", two),
       "holds more than 2^40 elements"},
      {NpyBytes("{'descr': '<f4', 'shape': (2,), }", two),
       "the header lacks one of 'descr', 'fortran_order' and 'shape'"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two),
       "the header has a key 'x'"},
      {NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", two),
       "the header has text after its dict"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<NpyArray> array = ParseNpy(c.bytes, "x.npy");
    ASSERT_FALSE(array.ok()) << c.message;
    EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(array.status().message(), ::testing::HasSubstr(c.message));
  }
}

TEST(NpyTest, EveryTruncationAndByteFlipIsAnErrorOrAnArrayNeverACrash) {
  // The sanitizer builds watch this: the reader must stay inside the bytes.
  const std::string good = NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }\n",
                                    Float32Bytes({1.0f, 2.0f}));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseNpy(good.substr(0, n), "x.npy").ok()) << n;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = good;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      absl::StatusOr<NpyArray> array = ParseNpy(flipped, "x.npy");
      if (array.ok()) {
        int64_t numel = 1;
        for (int64_t d : array->shape) numel *= d;
        EXPECT_EQ(static_cast<int64_t>(array->values.size()), numel);
      }
    }
  }
}

TEST(NpyTest, AFileLargerThanTheLimitIsNotRead) {
  const std::string path = TempPath("varlen-npy-large.npy");
  ASSERT_TRUE(WriteNpy(path, std::vector<double>(1000, 1.0), {1000}).ok());
  absl::StatusOr<NpyArray> array = ReadNpy(path, 4096);
  ASSERT_FALSE(array.ok());
  EXPECT_THAT(array.status().message(), ::testing::HasSubstr("bytes exceed the 4096"));
  EXPECT_EQ(ReadNpy(TempPath("varlen-npy-absent.npy"), 4096).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace varlen
