#include "varlen/cases/npy.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

// The .npy header: magic, version 1.0, and a Python dict literal padded
// with spaces to a multiple of 64 bytes, ending in a newline.
std::string Header(absl::string_view descr, const Shape& shape) {
  std::string shape_text = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) shape_text += ",";
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (",
                                  shape_text, "), }");
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

template <typename T>
void Append(std::string* bytes, T value) {  // little-endian hosts only (x86, Arm)
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  bytes->append(raw, sizeof(T));
}

absl::Status WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteNpy(const std::string& path, const Tensor& t) {
  absl::string_view descr;
  switch (t.dtype()) {
    case DType::kFloat16:
      descr = "<f2";
      break;
    case DType::kBFloat16:
    case DType::kFloat32:
      descr = "<f4";
      break;
    case DType::kFloat64:
      descr = "<f8";
      break;
    case DType::kInt16:
      descr = "<i2";
      break;
    case DType::kInt32:
      descr = "<i4";
      break;
    case DType::kInt64:
      descr = "<i8";
      break;
    case DType::kBool:
      descr = "|b1";
      break;
  }
  std::string bytes = Header(descr, t.shape());
  // The logical elements in row-major order, wherever the strides put them.
  for (int64_t n = 0; n < t.numel(); ++n) {
    const int64_t offset = t.StorageIndex(n);
    switch (t.dtype()) {
      case DType::kFloat16:
        Append(&bytes, DoubleToFloat16Bits(t.DoubleAt(offset)));
        break;
      case DType::kBFloat16:
      case DType::kFloat32:
        Append(&bytes, static_cast<float>(t.DoubleAt(offset)));
        break;
      case DType::kFloat64:
        Append(&bytes, t.DoubleAt(offset));
        break;
      case DType::kInt16:
        Append(&bytes, static_cast<int16_t>(t.IntAt(offset)));
        break;
      case DType::kInt32:
        Append(&bytes, static_cast<int32_t>(t.IntAt(offset)));
        break;
      case DType::kInt64:
        Append(&bytes, t.IntAt(offset));
        break;
      case DType::kBool:
        Append(&bytes, static_cast<uint8_t>(t.IntAt(offset) != 0));
        break;
    }
  }
  return WriteBytes(path, bytes);
}

absl::Status WriteNpy(const std::string& path, absl::Span<const double> values,
                      const Shape& shape) {
  std::string bytes = Header("<f8", shape);
  for (double v : values) Append(&bytes, v);
  return WriteBytes(path, bytes);
}

}  // namespace varlen
