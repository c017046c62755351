// Fuzz target: PyInt(), varlen's model of Python's int() that coerces
// max_seqlen, on a Python value decoded from the bytes (bool, int, float,
// None, a short list, and above all str: digits of many scripts, Unicode and
// ASCII spaces, signs, underscores, arbitrary code points, stray bytes and
// digit strings around CPython's 4300-digit limit).
//
// Built with VARLEN_FUZZ_WITH_PYTHON, it also calls CPython's own int() on
// the same value in an embedded interpreter, and requires:
//
//   * CPython's value when it fits in int64;
//   * OverflowError("Python int too large to convert to C long") when it
//     does not (the model's one intended difference);
//   * the same exception class and message when CPython raises.
//
// Without Python it checks what needs no oracle: no crash or undefined
// behaviour (ASan and UBSan watch), and results that agree with themselves.
// A violation prints the value, its UTF-8 bytes and both results, and aborts.

#ifdef VARLEN_FUZZ_WITH_PYTHON
// Python.h must come first: it sets feature macros for the system headers.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "varlen/core/status.h"
#include "varlen/core/value.h"
#include "violation.h"

namespace varlen {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr char kTooLarge[] = "Python int too large to convert to C long";
constexpr char kInvalidLiteral[] = "invalid literal for int() with base 10: ";

// The digit zeros of a sample of scripts (Unicode category Nd; each is
// followed by the other nine digits).
constexpr char32_t kDigitZeros[] = {
    0x0660,   // Arabic-Indic
    0x06f0,   // extended Arabic-Indic
    0x07c0,   // NKo
    0x0966,   // Devanagari
    0x09e6,   // Bengali
    0x0e50,   // Thai
    0x0f20,   // Tibetan
    0x1040,   // Myanmar
    0x17e0,   // Khmer
    0xa9d0,   // Javanese
    0xff10,   // fullwidth
    0x104a0,  // Osmanya
    0x11066,  // Brahmi
    0x16b50,  // Pahawh Hmong
    0x1d7ce,  // mathematical bold
    0x1d7f6,  // mathematical monospace
    0x1e950,  // Adlam
    0x1fbf0,  // segmented
};

// Numbers that are not decimal digits, and characters near the tables'
// edges.
constexpr char32_t kNearDigits[] = {
    0x00b2, 0x00b9, 0x00bc, 0x0669 + 1, 0x065f,  0x0f2a, 0x1369, 0x19da,  0x2070,
    0x2155, 0x2460, 0x3007, 0x4e00,     0x1d7cd, 0xff0f, 0xff1a, 0x1fbfa, 0x10ffff,
};

// Spaces: ASCII whitespace, the separators \x1c-\x1f (below 127: never
// stripped), Unicode whitespace, and look-alikes that are not whitespace.
constexpr char32_t kSpaces[] = {
    ' ',    '\t',   '\n',   '\v',   '\f',   '\r',   0x1c,   0x1d,   0x1e,   0x1f,
    0x0085, 0x00a0, 0x1680, 0x2000, 0x2005, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f,
    0x3000, 0x200b, 0x180e, 0xfeff, 0x2060, 0x0000, 0x007f, 0x00ad,
};

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class ValueDecoder {
 public:
  explicit ValueDecoder(FuzzedDataProvider& in) : in_(in) {}

  Value Decode(int depth = 0) {
    switch (in_.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
        return Value::Bool(in_.ConsumeBool());
      case 1:
        return Value::Int(Int());
      case 2:
        return Value::Float(Float());
      case 3:
        return Value::None();
      case 4: {
        std::vector<Value> items;
        const int count = depth < 2 ? in_.ConsumeIntegralInRange<int>(0, 3) : 0;
        for (int i = 0; i < count; ++i) items.push_back(Decode(depth + 1));
        return Value::List(std::move(items));
      }
      default:
        return Value::Str(Str());
    }
  }

 private:
  template <typename T>
  T PickOne(std::initializer_list<T> choices) {
    return *(choices.begin() + in_.ConsumeIntegralInRange<size_t>(0, choices.size() - 1));
  }
  template <typename T, size_t N>
  T PickFrom(const T (&choices)[N]) {
    return choices[in_.ConsumeIntegralInRange<size_t>(0, N - 1)];
  }

  int64_t Int() {
    if (in_.ConsumeBool()) return in_.ConsumeIntegral<int64_t>();
    return PickOne<int64_t>({0, 1, -1, kInt32Min, kInt32Max, kInt32Max + 1, kInt64Min,
                             kInt64Min + 1, kInt64Max, kInt64Max - 1});
  }

  double Float() {
    if (in_.ConsumeBool()) return std::bit_cast<double>(in_.ConsumeIntegral<uint64_t>());
    constexpr double kTwo63 = 9223372036854775808.0;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    return PickOne<double>({std::numeric_limits<double>::quiet_NaN(), kInf, -kInf, -0.0, 0.0,
                            std::numeric_limits<double>::denorm_min(), 0.5, -0.9999, 4096.75,
                            kTwo63, -kTwo63, std::nextafter(kTwo63, 0.0),
                            std::nextafter(-kTwo63, -kInf), 1e300, -1e19,
                            std::numeric_limits<double>::max()});
  }

  // A digit of value `value` in the script whose zero is `zero`.
  static void AppendDigit(char32_t zero, int value, std::string* out) {
    AppendUtf8(zero + static_cast<char32_t>(value), out);
  }

  char32_t Zero() { return in_.ConsumeBool() ? U'0' : PickFrom(kDigitZeros); }

  std::string Str() {
    std::string s;
    const int pieces = in_.ConsumeIntegralInRange<int>(0, 10);
    for (int i = 0; i < pieces && s.size() < 24'000; ++i) {
      switch (in_.ConsumeIntegralInRange<int>(0, 11)) {
        case 0:
        case 1: {  // a few digits of one script, perhaps with underscores
          const char32_t zero = Zero();
          const int count = in_.ConsumeIntegralInRange<int>(1, 20);
          const bool underscores = in_.ConsumeIntegralInRange<int>(0, 3) == 0;
          for (int d = 0; d < count; ++d) {
            if (underscores && d > 0 && in_.ConsumeBool()) s += '_';
            AppendDigit(zero, in_.ConsumeIntegralInRange<int>(0, 9), &s);
          }
          break;
        }
        case 2: {  // digits of mixed scripts
          const int count = in_.ConsumeIntegralInRange<int>(1, 8);
          for (int d = 0; d < count; ++d) {
            const char32_t zero = Zero();  // before the digit: a fixed order of reads
            AppendDigit(zero, in_.ConsumeIntegralInRange<int>(0, 9), &s);
          }
          break;
        }
        case 3: {  // a long run around the digit limit
          const int count = in_.ConsumeBool()
                                ? PickOne<int>({19, 20, 640, 641, 4299, 4300, 4301, 5000})
                                : in_.ConsumeIntegralInRange<int>(1, 5000);
          const char32_t zero = Zero();
          const int value = in_.ConsumeIntegralInRange<int>(0, 9);
          const int underscore_every = PickOne<int>({0, 0, 1, 3, 1000});
          for (int d = 0; d < count; ++d) {
            if (underscore_every > 0 && d > 0 && d % underscore_every == 0) s += '_';
            AppendDigit(zero, value, &s);
          }
          break;
        }
        case 4:
        case 5:  // spaces
          for (int n = in_.ConsumeIntegralInRange<int>(1, 3); n > 0; --n) {
            AppendUtf8(PickFrom(kSpaces), &s);
          }
          break;
        case 6:
          s += in_.ConsumeBool() ? '-' : '+';
          break;
        case 7:
          s += in_.ConsumeBool() ? "_" : "__";
          break;
        case 8: {  // any code point but a surrogate
          char32_t cp = in_.ConsumeIntegralInRange<char32_t>(0, 0x10ffff - 0x800);
          if (cp >= 0xd800) cp += 0x800;
          AppendUtf8(cp, &s);
          break;
        }
        case 9:
          AppendUtf8(PickFrom(kNearDigits), &s);
          break;
        case 10:  // a byte that may break UTF-8 (read as U+DC80..U+DCFF)
          s += static_cast<char>(in_.ConsumeIntegral<uint8_t>());
          break;
        case 11:  // int64's edges as text
          s += PickOne<const char*>({"9223372036854775807", "9223372036854775808",
                                     "-9223372036854775808", "-9223372036854775809", "0", "4096",
                                     "18446744073709551616"});
          break;
      }
    }
    return s;
  }

  FuzzedDataProvider& in_;
};

std::string HexBytes(const std::string& text) {
  std::string out;
  for (unsigned char c : text) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

std::string Describe(const absl::StatusOr<int64_t>& result) {
  return result.ok() ? absl::StrCat(*result) : FormatPythonError(result.status());
}

[[noreturn]] void Violation(absl::string_view property, const Value& value,
                            const absl::StatusOr<int64_t>& got, absl::string_view expected) {
  std::string bytes;
  if (value.kind() == Value::Kind::kStr) {
    bytes = absl::StrCat("\nUTF-8 bytes: ", HexBytes(value.as_str()), " (", value.as_str().size(),
                         " bytes)");
  }
  std::fprintf(stderr, "%s%s\nint(%s)%s\nPyInt:    %s\nexpected: %s\n",
               std::string(kViolationPrefix).c_str(), std::string(property).c_str(),
               value.Repr().c_str(), bytes.c_str(), Describe(got).c_str(),
               std::string(expected).c_str());
  std::abort();
}

bool IsError(const absl::StatusOr<int64_t>& result, PyErrorKind kind, absl::string_view message) {
  return !result.ok() && PythonErrorKindOf(result.status()) == kind &&
         result.status().message() == message;
}

// What holds without an oracle.
void CheckSelfConsistent(const Value& value, const absl::StatusOr<int64_t>& got) {
  const auto expect = [&](bool ok, absl::string_view what) {
    if (!ok) Violation("coerce-self-consistency", value, got, what);
  };
  switch (value.kind()) {
    case Value::Kind::kBool:
      expect(got.ok() && *got == (value.as_bool() ? 1 : 0), "0 or 1");
      return;
    case Value::Kind::kInt:
      expect(got.ok() && *got == value.as_int(), "the int itself");
      return;
    case Value::Kind::kFloat: {
      const double d = value.as_float();
      if (std::isnan(d)) {
        expect(IsError(got, PyErrorKind::kValueError, "cannot convert float NaN to integer"),
               "ValueError for NaN");
      } else if (std::isinf(d)) {
        expect(
            IsError(got, PyErrorKind::kOverflowError, "cannot convert float infinity to integer"),
            "OverflowError for infinity");
      } else if (std::trunc(d) >= -9223372036854775808.0 && std::trunc(d) < 9223372036854775808.0) {
        expect(got.ok() && *got == static_cast<int64_t>(std::trunc(d)), "the truncated float");
      } else {
        expect(IsError(got, PyErrorKind::kOverflowError, kTooLarge), kTooLarge);
      }
      return;
    }
    case Value::Kind::kStr:
      break;
    default:
      expect(!got.ok() && PythonErrorKindOf(got.status()) == PyErrorKind::kTypeError, "TypeError");
      return;
  }
  const std::string& text = value.as_str();
  // Text of plain ASCII digits (at most 18: inside int64) is their value.
  if (!text.empty() && text.size() <= 18 &&
      text.find_first_not_of("0123456789") == std::string::npos) {
    int64_t digits = 0;
    for (char c : text) digits = digits * 10 + (c - '0');
    expect(got.ok() && *got == digits, "the digits' value");
  }
  if (got.ok()) {
    // A value read from text reads back from its own decimal form.
    const absl::StatusOr<int64_t> again = PyInt(Value::Str(absl::StrCat(*got)), "max_seqlen");
    expect(again.ok() && *again == *got, "the same value from its decimal form");
    return;
  }
  const absl::string_view message = got.status().message();
  const std::optional<PyErrorKind> kind = PythonErrorKindOf(got.status());
  if (kind == PyErrorKind::kOverflowError) {
    expect(message == kTooLarge, kTooLarge);
  } else if (absl::StartsWith(message, kInvalidLiteral)) {
    // The text's repr, cut to at most 200 characters.
    const absl::string_view repr = message.substr(sizeof kInvalidLiteral - 1);
    size_t characters = 0;
    for (unsigned char c : repr) characters += (c & 0xc0) != 0x80;
    expect(kind == PyErrorKind::kValueError && characters <= 200 &&
               absl::StartsWith(PyStrRepr(text), repr),
           "ValueError with the text's repr, cut to 200 characters");
  } else {
    expect(kind == PyErrorKind::kValueError &&
               absl::StartsWith(message, "Exceeds the limit (4300 digits)") && text.size() > 4300,
           "ValueError for an invalid literal or too many digits");
  }
}

#ifdef VARLEN_FUZZ_WITH_PYTHON

// Starts the interpreter once, and leaves it running until exit (CPython's
// live objects stay reachable from its globals, so LeakSanitizer reports
// none). Isolated: no environment variable (such as PYTHONINTMAXSTRDIGITS)
// changes int(). CPython allocates through malloc rather than its own
// mmap'ed arenas: LeakSanitizer does not scan those arenas, so it would
// report every block that only an object inside them points to, and ASan
// would not check the objects.
void StartPython() {
  static const bool started = [] {
    PyPreConfig preconfig;
    PyPreConfig_InitIsolatedConfig(&preconfig);
    preconfig.allocator = PYMEM_ALLOCATOR_MALLOC;
    PyStatus status = Py_PreInitialize(&preconfig);
    if (PyStatus_Exception(status)) Py_ExitStatusException(status);
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.site_import = 0;  // int() needs no site packages
    status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) Py_ExitStatusException(status);
    return true;
  }();
  (void)started;
}

// A new reference to the Python object for `value`, or nullptr for kinds
// CPython has no built-in counterpart for (tensors, caches).
PyObject* ToPython(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kNone:
      Py_RETURN_NONE;
    case Value::Kind::kBool:
      return PyBool_FromLong(value.as_bool());
    case Value::Kind::kInt:
      return PyLong_FromLongLong(value.as_int());
    case Value::Kind::kFloat:
      return PyFloat_FromDouble(value.as_float());
    case Value::Kind::kStr:
      // Bytes that are not UTF-8 read as U+DC80..U+DCFF, as in the model.
      return PyUnicode_DecodeUTF8(
          value.as_str().data(), static_cast<Py_ssize_t>(value.as_str().size()), "surrogateescape");
    case Value::Kind::kList: {
      PyObject* list = PyList_New(0);
      for (const Value& item : value.as_list()) {
        PyObject* element = ToPython(item);
        if (list == nullptr || element == nullptr || PyList_Append(list, element) != 0) {
          Py_XDECREF(element);
          Py_XDECREF(list);
          return nullptr;
        }
        Py_DECREF(element);
      }
      return list;
    }
    default:
      return nullptr;
  }
}

// str(x) as UTF-8; surrogates, which a message should never hold, are
// written as their own bytes so a difference still shows.
std::string PyStrOf(PyObject* object) {
  PyObject* text = PyObject_Str(object);
  PyObject* bytes =
      text == nullptr ? nullptr : PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
  std::string out = bytes == nullptr ? "<str() failed>"
                                     : std::string(PyBytes_AS_STRING(bytes),
                                                   static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
  Py_XDECREF(bytes);
  Py_XDECREF(text);
  PyErr_Clear();
  return out;
}

// The outcome of CPython's int(value).
struct CPythonResult {
  std::string description;
  bool raised = false;
  std::string exception;  // the class name
  std::string message;
  std::optional<int64_t> value;  // when it returned a value inside int64
};

// nullopt when the value has no built-in Python counterpart.
std::optional<CPythonResult> CPythonInt(const Value& value) {
  StartPython();
  PyObject* argument = ToPython(value);
  if (argument == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  CPythonResult r;
  PyObject* result = PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyLong_Type), argument);
  Py_DECREF(argument);
  if (result == nullptr) {
    PyObject* type = nullptr;
    PyObject* exception = nullptr;
    PyObject* traceback = nullptr;
    PyErr_Fetch(&type, &exception, &traceback);
    PyErr_NormalizeException(&type, &exception, &traceback);
    r.raised = true;
    r.exception = reinterpret_cast<PyTypeObject*>(type)->tp_name;
    r.message = exception == nullptr ? "" : PyStrOf(exception);
    r.description = absl::StrCat(r.exception, ": ", r.message);
    Py_XDECREF(type);
    Py_XDECREF(exception);
    Py_XDECREF(traceback);
    return r;
  }
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(result, &overflow);
  if (overflow == 0) {
    r.value = n;
    r.description = absl::StrCat(n);
  } else {
    r.description = absl::StrCat(PyStrOf(result).substr(0, 60), "... (outside int64)");
  }
  Py_DECREF(result);
  return r;
}

void CheckAgainstCPython(const Value& value, const absl::StatusOr<int64_t>& got) {
  const std::optional<CPythonResult> python = CPythonInt(value);
  if (!python) return;
  bool same;
  std::string expected = python->description;
  if (python->raised) {
    same = !got.ok() && PythonErrorKindOf(got.status()).has_value() &&
           PyErrorKindName(*PythonErrorKindOf(got.status())) == python->exception &&
           got.status().message() == python->message;
  } else if (python->value) {
    same = got.ok() && *got == *python->value;
  } else {
    same = IsError(got, PyErrorKind::kOverflowError, kTooLarge);
    expected = absl::StrCat("OverflowError: ", kTooLarge, " (CPython: ", expected, ")");
  }
  if (!same) Violation("coerce-differential", value, got, expected);
}

#endif  // VARLEN_FUZZ_WITH_PYTHON

}  // namespace
}  // namespace varlen

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const varlen::Value value = varlen::ValueDecoder(in).Decode();
  const absl::StatusOr<int64_t> got = varlen::PyInt(value, "max_seqlen");
  varlen::CheckSelfConsistent(value, got);
#ifdef VARLEN_FUZZ_WITH_PYTHON
  varlen::CheckAgainstCPython(value, got);
#endif
  return 0;
}
