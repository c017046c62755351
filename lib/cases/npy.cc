#include "varlen/cases/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
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

// The header's dict literal, as numpy.save writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Keys and strings in single or double quotes; the shape a tuple of
// non-negative integers. Nothing else of Python's syntax is needed.
class HeaderDict {
 public:
  HeaderDict(absl::string_view text, absl::string_view origin) : text_(text), origin_(origin) {}

  absl::Status Parse() {
    SkipSpace();
    if (!Consume('{')) return Error("the header is not a dict literal");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (!ReadQuoted(&key)) return Error("a key of the header is not a quoted string");
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("no ':' after the header's key '", key, "'"));
      SkipSpace();
      absl::Status value;
      if (key == "descr") {
        value = ReadQuoted(&descr_) ? absl::OkStatus()
                                    : Error(
                                          "'descr' is not a string: structured arrays are not "
                                          "read, only an array of one floating dtype");
        has_descr_ = true;
      } else if (key == "fortran_order") {
        value = ReadBool(&fortran_order_);
        has_fortran_order_ = true;
      } else if (key == "shape") {
        value = ReadShape();
        has_shape_ = true;
      } else {
        return Error(absl::StrCat("the header has a key '", key,
                                  "': numpy writes only 'descr', 'fortran_order' and 'shape'"));
      }
      if (!value.ok()) return value;
      SkipSpace();
      if (!Consume(',')) {
        SkipSpace();
        if (!Consume('}')) return Error("the header's dict is not closed");
        break;
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("the header has text after its dict");
    if (!has_descr_ || !has_fortran_order_ || !has_shape_) {
      return Error("the header lacks one of 'descr', 'fortran_order' and 'shape'");
    }
    return absl::OkStatus();
  }

  const std::string& descr() const { return descr_; }
  bool fortran_order() const { return fortran_order_; }
  const Shape& shape() const { return shape_; }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", what, " (a .npy header)"));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ReadQuoted(std::string* out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return false;
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }
  absl::Status ReadBool(bool* out) {
    for (auto [word, value] :
         {std::pair<absl::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        *out = value;
        return absl::OkStatus();
      }
    }
    return Error("'fortran_order' is neither True nor False");
  }
  absl::Status ReadShape() {
    if (!Consume('(')) return Error("'shape' is not a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) return absl::OkStatus();
      if (pos_ >= text_.size() || !absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return Error("'shape' holds something other than non-negative integers");
      }
      int64_t dim = 0;
      while (pos_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        dim = dim * 10 + (text_[pos_++] - '0');
        if (dim > kMaxDim) return Error(absl::StrCat("a dimension of 'shape' exceeds ", kMaxDim));
      }
      if (shape_.size() == kMaxRank) {
        return Error(absl::StrCat("'shape' has more than ", kMaxRank, " dimensions"));
      }
      shape_.push_back(dim);
      SkipSpace();
      if (!Consume(',')) {
        SkipSpace();
        if (!Consume(')')) return Error("'shape' is not a tuple of integers");
        return absl::OkStatus();
      }
    }
  }

  static constexpr int64_t kMaxDim = int64_t{1} << 40;
  static constexpr size_t kMaxRank = 16;
  absl::string_view text_;
  absl::string_view origin_;
  size_t pos_ = 0;
  std::string descr_;
  bool fortran_order_ = false;
  Shape shape_;
  bool has_descr_ = false, has_fortran_order_ = false, has_shape_ = false;
};

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view origin) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", what));
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view("\x93NUMPY", 6)) {
    return error("not a .npy file (it does not start with \"\\x93NUMPY\")");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) {
    return error(absl::StrCat(".npy format version ", major, ".",
                              static_cast<unsigned char>(bytes[7]),
                              " is not one of 1.0, 2.0 and 3.0"));
  }
  // Version 1.0 has a 2-byte header length, 2.0 and 3.0 a 4-byte one.
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) return error("the file ends inside its header");
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) {
    header_length |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  }
  const size_t data_start = 8 + length_bytes + header_length;
  if (header_length > bytes.size() || data_start > bytes.size()) {
    return error(absl::StrCat("the header's length ", header_length, " runs past the file's end (",
                              bytes.size(), " bytes)"));
  }
  HeaderDict header(bytes.substr(8 + length_bytes, header_length), origin);
  if (absl::Status parsed = header.Parse(); !parsed.ok()) return parsed;

  size_t element_size = 0;
  if (header.descr() == "<f2") element_size = 2;
  if (header.descr() == "<f4") element_size = 4;
  if (header.descr() == "<f8") element_size = 8;
  if (element_size == 0) {
    return error(absl::StrCat("'descr' is '", header.descr(),
                              "': q, k and v are read from little-endian float16, float32 or "
                              "float64 arrays ('<f2', '<f4', '<f8'; numpy has no bfloat16: save "
                              "a bfloat16 tensor as float32, which holds it exactly)"));
  }
  if (header.fortran_order()) {
    return error("'fortran_order' is True: save a C-ordered array (numpy.ascontiguousarray)");
  }
  NpyArray array;
  array.shape = header.shape();
  int64_t numel = 1;
  for (int64_t dim : array.shape) {
    if (dim != 0 && numel > (int64_t{1} << 40) / dim) {
      return error(absl::StrCat("'shape' (", absl::StrJoin(array.shape, ", "),
                                ") holds more than 2^40 elements"));
    }
    numel *= dim;
  }
  const size_t data_bytes = bytes.size() - data_start;
  if (data_bytes != static_cast<size_t>(numel) * element_size) {
    return error(absl::StrCat("'shape' (", absl::StrJoin(array.shape, ", "), ") of '",
                              header.descr(), "' needs ", numel * element_size,
                              " bytes of data; the file holds ", data_bytes));
  }
  array.values.resize(numel);
  const char* data = bytes.data() + data_start;
  for (int64_t i = 0; i < numel; ++i) {
    const char* p = data + i * element_size;
    array.values[i] = element_size == 2   ? Float16BitsToDouble(Load<uint16_t>(p))
                      : element_size == 4 ? static_cast<double>(Load<float>(p))
                                          : Load<double>(p);
  }
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": not a regular file"));
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read the file: ", ec.message()));
  if (size > static_cast<uintmax_t>(max_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes exceed the ",
                                                   max_bytes, " this case's q, k or v can take"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in && !in.eof()) return absl::NotFoundError(absl::StrCat(path, ": cannot read the file"));
  return ParseNpy(bytes.str(), path);
}

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
