#include "varlen/core/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varlen/core/status.h"

namespace varlen {

absl::string_view Value::TypeName() const {
  switch (kind()) {
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kTensor:
      return "Tensor";
    case Kind::kList:
      return "list";
    case Kind::kSingletonCache:
      return "SingletonCache";
  }
  return "object";
}

std::string Value::Repr() const {
  switch (kind()) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(as_int());
    case Kind::kFloat:
      return PyFloatRepr(as_float());
    case Kind::kStr:
      return PyStrRepr(as_str());
    case Kind::kTensor:
      return as_tensor().DebugString();
    case Kind::kList:
      return absl::StrCat(
          "[",
          absl::StrJoin(as_list(), ", ",
                        [](std::string* out, const Value& v) { out->append(v.Repr()); }),
          "]");
    case Kind::kSingletonCache:
      return "<SingletonCache object>";
  }
  return "<object>";
}

Kwargs::Kwargs(std::initializer_list<std::pair<std::string, Value>> items) {
  for (const auto& [key, value] : items) set(key, value);
}

const Value* Kwargs::find(absl::string_view key) const {
  for (const auto& item : items_) {
    if (item.first == key) return &item.second;
  }
  return nullptr;
}

Value Kwargs::get(absl::string_view key) const {
  const Value* v = find(key);
  return v == nullptr ? Value::None() : *v;
}

void Kwargs::set(absl::string_view key, Value value) {
  for (auto& item : items_) {
    if (item.first == key) {
      item.second = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::string(key), std::move(value));
}

void Kwargs::erase(absl::string_view key) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == key) {
      items_.erase(it);
      return;
    }
  }
}

std::string PyStrRepr(absl::string_view text) {
  const bool has_single = text.find('\'') != absl::string_view::npos;
  const bool has_double = text.find('"') != absl::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);  // printable ASCII and UTF-8 bytes
    }
  }
  out += quote;
  return out;
}

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest digit string that reads back as `value` (Python's repr).
  char buf[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  // buf is "[-]d.ddde[+-]xx": split into sign, digits and exponent.
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent)));
  } else if (exponent < 0) {
    absl::StrAppend(&out, "0.", std::string(static_cast<size_t>(-exponent - 1), '0'), digits);
  } else {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      absl::StrAppend(&out, digits, std::string(int_digits - digits.size(), '0'), ".0");
    } else {
      absl::StrAppend(&out, digits.substr(0, int_digits), ".", digits.substr(int_digits));
    }
  }
  return out;
}

namespace {

// int() strips only ASCII whitespace from ASCII text (\x1c-\x1f are
// str.isspace() but not stripped).
bool IsPyIntSpace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

absl::Status InvalidLiteral(absl::string_view text) {
  // CPython formats it with %.200R: at most 200 characters, not bytes.
  std::string repr = PyStrRepr(text);
  size_t characters = 0, cut = 0;
  for (; cut < repr.size(); ++cut) {
    const bool starts_character = (static_cast<unsigned char>(repr[cut]) & 0xc0) != 0x80;
    if (starts_character && characters++ == 200) break;
  }
  repr.resize(cut);
  return PythonError(PyErrorKind::kValueError,
                     absl::StrCat("invalid literal for int() with base 10: ", repr));
}

absl::Status TooLarge() {
  return PythonError(PyErrorKind::kOverflowError, "Python int too large to convert to C long");
}

absl::StatusOr<int64_t> ParsePyIntLiteral(absl::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && IsPyIntSpace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && IsPyIntSpace(static_cast<unsigned char>(text[end - 1]))) --end;
  absl::string_view body = text.substr(begin, end - begin);
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  // Syntax first: digits with single underscores between them.
  bool previous_was_digit = false;
  for (char c : body) {
    if (c == '_') {
      if (!previous_was_digit) return InvalidLiteral(text);
      previous_was_digit = false;
    } else if (c >= '0' && c <= '9') {
      previous_was_digit = true;
    } else {
      return InvalidLiteral(text);
    }
  }
  if (!previous_was_digit) return InvalidLiteral(text);
  // Accumulate as a negative number so INT64_MIN parses.
  int64_t acc = 0;
  for (char c : body) {
    if (c == '_') continue;
    const int digit = c - '0';
    if (acc < (std::numeric_limits<int64_t>::min() + digit) / 10) return TooLarge();
    acc = acc * 10 - digit;
  }
  if (!negative) {
    if (acc == std::numeric_limits<int64_t>::min()) return TooLarge();
    return -acc;
  }
  return acc;
}

}  // namespace

absl::StatusOr<int64_t> PyInt(const Value& value, absl::string_view what) {
  switch (value.kind()) {
    case Value::Kind::kBool:
      return value.as_bool() ? 1 : 0;
    case Value::Kind::kInt:
      return value.as_int();
    case Value::Kind::kFloat: {
      const double d = value.as_float();
      if (std::isnan(d)) {
        return PythonError(PyErrorKind::kValueError, "cannot convert float NaN to integer");
      }
      if (std::isinf(d)) {
        return PythonError(PyErrorKind::kOverflowError, "cannot convert float infinity to integer");
      }
      const double t = std::trunc(d);
      if (t < -9223372036854775808.0 || t >= 9223372036854775808.0) return TooLarge();
      return static_cast<int64_t>(t);
    }
    case Value::Kind::kStr:
      return ParsePyIntLiteral(value.as_str());
    case Value::Kind::kTensor: {
      const Tensor& t = value.as_tensor();
      if (t.numel() != 1) {
        return PythonError(PyErrorKind::kValueError,
                           "only one element tensors can be converted to Python scalars");
      }
      if (IsFloatingPoint(t.dtype())) {
        return PyInt(Value::Float(t.ToHostDoubles(what)[0]), what);
      }
      return t.ToHostInts(what)[0];
    }
    default:
      return PythonError(
          PyErrorKind::kTypeError,
          absl::StrCat("int() argument must be a string, a bytes-like object or a real "
                       "number, not '",
                       value.TypeName(), "'"));
  }
}

}  // namespace varlen
