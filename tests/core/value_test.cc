// Tests for Value, Kwargs, SingletonCache, Python reprs and PyInt (int()).

#include "varlen/core/value.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"

namespace varlen {
namespace {

using ::varlen::test::ExpectPyError;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kInvalidLiteral[] = "invalid literal for int() with base 10: ";
constexpr char kTooLarge[] = "Python int too large to convert to C long";

void ExpectIntOk(const Value& value, int64_t expected) {
  absl::StatusOr<int64_t> result = PyInt(value, "max_seqlen");
  ASSERT_TRUE(result.ok()) << value.Repr() << ": " << FormatPythonError(result.status());
  EXPECT_EQ(*result, expected) << value.Repr();
}

// ---------------------------------------------------------------------------
// Kinds and type names

TEST(ValueTest, DefaultIsNone) {
  Value v;
  EXPECT_EQ(v.kind(), Value::Kind::kNone);
  EXPECT_TRUE(v.is_none());
  EXPECT_FALSE(v.is_tensor());
  EXPECT_TRUE(Value::None().is_none());
}

TEST(ValueTest, KindsAccessorsAndTypeNames) {
  const Tensor t = Tensor::FromInts({1}, DType::kInt32, Device::kCpu);
  auto cache = std::make_shared<SingletonCache>();
  struct Case {
    Value value;
    Value::Kind kind;
    const char* type_name;
  };
  const std::vector<Case> cases = {
      {Value::None(), Value::Kind::kNone, "NoneType"},
      {Value::Bool(true), Value::Kind::kBool, "bool"},
      {Value::Int(3), Value::Kind::kInt, "int"},
      {Value::Float(2.5), Value::Kind::kFloat, "float"},
      {Value::Str("x"), Value::Kind::kStr, "str"},
      {Value::FromTensor(t), Value::Kind::kTensor, "Tensor"},
      {Value::List({}), Value::Kind::kList, "list"},
      {Value::Cache(cache), Value::Kind::kSingletonCache, "SingletonCache"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.value.kind(), c.kind) << c.type_name;
    EXPECT_EQ(c.value.TypeName(), c.type_name);
    EXPECT_EQ(c.value.is_none(), c.kind == Value::Kind::kNone) << c.type_name;
    EXPECT_EQ(c.value.is_tensor(), c.kind == Value::Kind::kTensor) << c.type_name;
  }
  EXPECT_TRUE(cases[1].value.as_bool());
  EXPECT_EQ(cases[2].value.as_int(), 3);
  EXPECT_EQ(cases[3].value.as_float(), 2.5);
  EXPECT_EQ(cases[4].value.as_str(), "x");
  EXPECT_TRUE(cases[5].value.as_tensor().SharesStorageWith(t));
  EXPECT_THAT(cases[6].value.as_list(), IsEmpty());
  EXPECT_EQ(cases[7].value.as_cache(), cache);
}

TEST(ValueTest, TensorsAndCachesHaveReferenceSemantics) {
  const Value a = Value::FromTensor(Tensor::FromInts({1, 2}, DType::kInt64, Device::kCpu));
  const Value b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  b.as_tensor().SetIntAt(0, 42);
  EXPECT_EQ(a.as_tensor().IntAt(0), 42);

  const Value c = Value::Cache(std::make_shared<SingletonCache>());
  const Value d = c;  // NOLINT(performance-unnecessary-copy-initialization)
  d.as_cache()->max_seqlen = 17;
  EXPECT_EQ(c.as_cache()->max_seqlen, 17);
}

// ---------------------------------------------------------------------------
// Repr

TEST(ValueReprTest, Scalars) {
  EXPECT_EQ(Value::None().Repr(), "None");
  EXPECT_EQ(Value::Bool(true).Repr(), "True");
  EXPECT_EQ(Value::Bool(false).Repr(), "False");
  EXPECT_EQ(Value::Int(0).Repr(), "0");
  EXPECT_EQ(Value::Int(-3).Repr(), "-3");
  EXPECT_EQ(Value::Int(std::numeric_limits<int64_t>::max()).Repr(), "9223372036854775807");
  EXPECT_EQ(Value::Int(std::numeric_limits<int64_t>::min()).Repr(), "-9223372036854775808");
}

TEST(ValueReprTest, FloatsLikePython) {
  struct Case {
    double value;
    const char* repr;
  };
  const Case cases[] = {
      {5.9, "5.9"},
      {1e16, "1e+16"},
      {1e-5, "1e-05"},
      {0.0001, "0.0001"},
      {100.0, "100.0"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {1.0, "1.0"},
      {-1.5, "-1.5"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0 / 3.0, "0.3333333333333333"},
      {2.0 / 3.0, "0.6666666666666666"},
      {0.001, "0.001"},
      {1.5e-4, "0.00015"},
      {1.5e-7, "1.5e-07"},
      {2.5e-5, "2.5e-05"},
      {12345.678, "12345.678"},
      {1e15, "1000000000000000.0"},
      {9999999999999998.0, "9999999999999998.0"},
      {9007199254740992.0, "9007199254740992.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {1e22, "1e+22"},
      {-1e16, "-1e+16"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {kInf, "inf"},
      {-kInf, "-inf"},
      {std::nan(""), "nan"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Value::Float(c.value).Repr(), c.repr);
    EXPECT_EQ(PyFloatRepr(c.value), c.repr);
  }
}

TEST(ValueReprTest, StringsUsePythonsQuoteChoiceAndEscapes) {
  EXPECT_EQ(Value::Str("auto").Repr(), "'auto'");
  EXPECT_EQ(Value::Str("").Repr(), "''");
  EXPECT_EQ(Value::Str("it's").Repr(), "\"it's\"");
  EXPECT_EQ(Value::Str("say \"hi\"").Repr(), "'say \"hi\"'");
  EXPECT_EQ(Value::Str("both ' and \"").Repr(), "'both \\' and \"'");
  EXPECT_EQ(Value::Str("a\\b").Repr(), "'a\\\\b'");
  EXPECT_EQ(Value::Str("line\nnext\ttab\rend").Repr(), "'line\\nnext\\ttab\\rend'");
  EXPECT_EQ(Value::Str(std::string("\x00\x1f\x7f", 3)).Repr(), "'\\x00\\x1f\\x7f'");
  EXPECT_EQ(Value::Str("\x0b\x0c").Repr(), "'\\x0b\\x0c'");
  EXPECT_EQ(Value::Str("h\xc3\xa9llo").Repr(), "'h\xc3\xa9llo'");  // printable UTF-8 as is
}

TEST(ValueReprTest, PyStrReprMatchesValueRepr) {
  for (const char* s : {"", "17", "it's", "a\"b", "'\"", "\\n"}) {
    EXPECT_EQ(PyStrRepr(s), Value::Str(s).Repr()) << s;
  }
  EXPECT_EQ(PyStrRepr("'\""), "'\\'\"'");
  EXPECT_EQ(PyStrRepr("\\n"), "'\\\\n'");
}

TEST(ValueReprTest, Lists) {
  EXPECT_EQ(Value::List({}).Repr(), "[]");
  EXPECT_EQ(Value::List({Value::Int(1), Value::Int(2)}).Repr(), "[1, 2]");
  EXPECT_EQ(Value::List({Value::Int(1),
                         Value::List({Value::Float(2.5), Value::Str("a"), Value::List({})}),
                         Value::None(), Value::Bool(false)})
                .Repr(),
            "[1, [2.5, 'a', []], None, False]");
}

TEST(ValueReprTest, TensorsAndCaches) {
  const Tensor t = Tensor::FromInts({0, 480, 1200}, DType::kInt32, Device::kCuda);
  EXPECT_EQ(Value::FromTensor(t).Repr(), "tensor([0, 480, 1200], dtype=int32, device=cuda)");
  EXPECT_EQ(Value::FromTensor(t).Repr(), t.DebugString());
  EXPECT_EQ(Value::Cache(std::make_shared<SingletonCache>()).Repr(), "<SingletonCache object>");
}

TEST(ValueReprTest, ReprOfATensorRecordsNoSync) {
  const Value v = Value::FromTensor(Tensor::FromInts({1}, DType::kInt64, Device::kCuda));
  ScopedDeviceLedger ledger;
  v.Repr();
  EXPECT_THAT(ledger.events(), IsEmpty());
}

// ---------------------------------------------------------------------------
// Kwargs

TEST(KwargsTest, AbsentDiffersFromNone) {
  Kwargs kwargs;
  kwargs.set("sequence_lengths", Value::None());
  EXPECT_TRUE(kwargs.contains("sequence_lengths"));
  ASSERT_NE(kwargs.find("sequence_lengths"), nullptr);
  EXPECT_TRUE(kwargs.find("sequence_lengths")->is_none());
  EXPECT_FALSE(kwargs.contains("max_seqlen"));
  EXPECT_EQ(kwargs.find("max_seqlen"), nullptr);
}

TEST(KwargsTest, GetReturnsNoneForAbsentKeys) {
  const Kwargs kwargs = {{"max_seqlen", Value::Int(64)}};
  EXPECT_TRUE(kwargs.get("cu_seqlens").is_none());
  EXPECT_EQ(kwargs.get("max_seqlen").kind(), Value::Kind::kInt);
  EXPECT_EQ(kwargs.get("max_seqlen").as_int(), 64);
}

TEST(KwargsTest, SetReplacesInPlaceAndKeepsTheFirstPosition) {
  Kwargs kwargs;
  kwargs.set("a", Value::Int(1));
  kwargs.set("b", Value::Int(2));
  kwargs.set("c", Value::Int(3));
  kwargs.set("a", Value::Str("new"));
  ASSERT_EQ(kwargs.items().size(), 3u);
  EXPECT_EQ(kwargs.items()[0].first, "a");
  EXPECT_EQ(kwargs.items()[0].second.as_str(), "new");
  EXPECT_EQ(kwargs.items()[1].first, "b");
  EXPECT_EQ(kwargs.items()[2].first, "c");
}

TEST(KwargsTest, InitializerListBehavesLikeADictLiteral) {
  // {"a": 1, "b": 2, "a": 3} == {"a": 3, "b": 2}
  const Kwargs kwargs = {{"a", Value::Int(1)}, {"b", Value::Int(2)}, {"a", Value::Int(3)}};
  ASSERT_EQ(kwargs.items().size(), 2u);
  EXPECT_EQ(kwargs.items()[0].first, "a");
  EXPECT_EQ(kwargs.items()[0].second.as_int(), 3);
  EXPECT_EQ(kwargs.items()[1].first, "b");
}

TEST(KwargsTest, EraseRemovesAndReinsertGoesLast) {
  Kwargs kwargs = {{"a", Value::Int(1)}, {"b", Value::Int(2)}, {"c", Value::Int(3)}};
  kwargs.erase("a");
  EXPECT_FALSE(kwargs.contains("a"));
  ASSERT_EQ(kwargs.items().size(), 2u);
  EXPECT_EQ(kwargs.items()[0].first, "b");
  kwargs.set("a", Value::None());
  ASSERT_EQ(kwargs.items().size(), 3u);
  EXPECT_EQ(kwargs.items()[2].first, "a");
  EXPECT_TRUE(kwargs.contains("a"));
}

TEST(KwargsTest, EraseOfAnAbsentKeyIsANoOp) {
  Kwargs kwargs = {{"a", Value::Int(1)}};
  kwargs.erase("zzz");
  ASSERT_EQ(kwargs.items().size(), 1u);
  EXPECT_EQ(kwargs.items()[0].first, "a");
  Kwargs empty;
  empty.erase("a");
  EXPECT_THAT(empty.items(), IsEmpty());
}

TEST(KwargsTest, KeysAreExactStrings) {
  const Kwargs kwargs = {{"max_seqlen", Value::Int(1)}};
  EXPECT_FALSE(kwargs.contains("max_seqlen "));
  EXPECT_FALSE(kwargs.contains("Max_seqlen"));
  EXPECT_FALSE(kwargs.contains("max"));
  EXPECT_FALSE(kwargs.contains(""));
}

// ---------------------------------------------------------------------------
// SingletonCache

TEST(SingletonCacheTest, StartsEmpty) {
  SingletonCache cache;
  EXPECT_FALSE(cache.data.has_value());
  EXPECT_FALSE(cache.max_seqlen.has_value());
}

TEST(SingletonCacheTest, SetDataClearsTheCachedMaxSeqlen) {
  SingletonCache cache;
  const Tensor first = Tensor::FromInts({0, 4}, DType::kInt32, Device::kCuda);
  cache.set_data(first);
  cache.max_seqlen = 4;
  const Tensor second = Tensor::FromInts({0, 9}, DType::kInt32, Device::kCuda);
  cache.set_data(second);
  EXPECT_FALSE(cache.max_seqlen.has_value());
  ASSERT_TRUE(cache.data.has_value());
  EXPECT_TRUE(cache.data->SharesStorageWith(second));
  EXPECT_FALSE(cache.data->SharesStorageWith(first));
}

// ---------------------------------------------------------------------------
// PyInt: Python's int()

TEST(PyIntTest, BoolsAndInts) {
  ExpectIntOk(Value::Bool(true), 1);
  ExpectIntOk(Value::Bool(false), 0);
  ExpectIntOk(Value::Int(0), 0);
  ExpectIntOk(Value::Int(-17), -17);
  ExpectIntOk(Value::Int(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  ExpectIntOk(Value::Int(std::numeric_limits<int64_t>::min()), std::numeric_limits<int64_t>::min());
}

TEST(PyIntTest, FloatsTruncateTowardZero) {
  ExpectIntOk(Value::Float(5.9), 5);
  ExpectIntOk(Value::Float(-5.9), -5);
  ExpectIntOk(Value::Float(0.5), 0);
  ExpectIntOk(Value::Float(-0.5), 0);
  ExpectIntOk(Value::Float(-0.0), 0);
  ExpectIntOk(Value::Float(4096.0), 4096);
  ExpectIntOk(Value::Float(1e18), 1000000000000000000);
  ExpectIntOk(Value::Float(-9223372036854775808.0), std::numeric_limits<int64_t>::min());
  ExpectIntOk(Value::Float(std::nextafter(9223372036854775808.0, 0.0)),
              int64_t{9223372036854774784});
}

TEST(PyIntTest, NonFiniteFloats) {
  ExpectPyError(PyInt(Value::Float(kInf), "x"), PyErrorKind::kOverflowError,
                "cannot convert float infinity to integer");
  ExpectPyError(PyInt(Value::Float(-kInf), "x"), PyErrorKind::kOverflowError,
                "cannot convert float infinity to integer");
  ExpectPyError(PyInt(Value::Float(std::nan("")), "x"), PyErrorKind::kValueError,
                "cannot convert float NaN to integer");
}

TEST(PyIntTest, FloatsOutsideInt64Overflow) {
  ExpectPyError(PyInt(Value::Float(9223372036854775808.0), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
  ExpectPyError(PyInt(Value::Float(1e19), "x"), PyErrorKind::kOverflowError, kTooLarge);
  ExpectPyError(PyInt(Value::Float(-1e300), "x"), PyErrorKind::kOverflowError, kTooLarge);
  ExpectPyError(PyInt(Value::Float(std::nextafter(-9223372036854775808.0, -kInf)), "x"),
                PyErrorKind::kOverflowError, kTooLarge);
}

TEST(PyIntTest, ValidStringLiterals) {
  struct Case {
    const char* text;
    int64_t value;
  };
  const Case cases[] = {
      {"17", 17},
      {" 17 ", 17},
      {"+5", 5},
      {"-3", -3},
      {"007", 7},
      {"1_000", 1000},
      {"0", 0},
      {"-0", 0},
      {"+0", 0},
      {"00", 0},
      {"0_0", 0},
      {"1_2_3", 123},
      {"\t\n17\r\x0b\x0c", 17},
      {"  -42\n", -42},
      {"-0_7", -7},
      {"000000000000000000000000000001", 1},
  };
  for (const Case& c : cases) ExpectIntOk(Value::Str(c.text), c.value);
}

TEST(PyIntTest, Int64Limits) {
  ExpectIntOk(Value::Str("9223372036854775807"), std::numeric_limits<int64_t>::max());
  ExpectIntOk(Value::Str("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  ExpectIntOk(Value::Str("9_223_372_036_854_775_807"), std::numeric_limits<int64_t>::max());
  ExpectIntOk(Value::Str("0009223372036854775807"), std::numeric_limits<int64_t>::max());
  ExpectPyError(PyInt(Value::Str("9223372036854775808"), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
  ExpectPyError(PyInt(Value::Str("-9223372036854775809"), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
  ExpectPyError(PyInt(Value::Str("99999999999999999999999"), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
  ExpectPyError(PyInt(Value::Str("+18446744073709551616"), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
}

TEST(PyIntTest, InvalidStringLiteralsQuoteTheOriginalString) {
  struct Case {
    const char* text;
    const char* repr;
  };
  const Case cases[] = {
      {"17.0", "'17.0'"},   {"4k", "'4k'"},        {"0x10", "'0x10'"},  {"", "''"},
      {"auto", "'auto'"},   {"1__0", "'1__0'"},    {"_1", "'_1'"},      {"1_", "'1_'"},
      {" - 5", "' - 5'"},   {"+", "'+'"},          {"-", "'-'"},        {"+_1", "'+_1'"},
      {"1 0", "'1 0'"},     {"+-5", "'+-5'"},      {"--5", "'--5'"},    {"   ", "'   '"},
      {"1e3", "'1e3'"},     {"inf", "'inf'"},      {"nan", "'nan'"},    {"None", "'None'"},
      {"it's", "\"it's\""}, {" 4k\n", "' 4k\\n'"}, {"5\t_", "'5\\t_'"},
  };
  for (const Case& c : cases) {
    ExpectPyError(PyInt(Value::Str(c.text), "max_seqlen"), PyErrorKind::kValueError,
                  std::string(kInvalidLiteral) + c.repr);
  }
}

TEST(PyIntTest, OnlyAsciiWhitespaceIsStripped) {
  // Python's int() strips ' ' and \t..\r but not the separators \x1c..\x1f.
  ExpectPyError(PyInt(Value::Str(std::string(1, '\x1c') + "17"), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'\\x1c17'");
  ExpectPyError(PyInt(Value::Str("17\x1f"), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'17\\x1f'");
}

TEST(PyIntTest, LongLiteralsAreTruncatedToTwoHundredCharactersOfRepr) {
  // CPython formats the literal with %.200R.
  const std::string long_text(300, 'a');
  ExpectPyError(PyInt(Value::Str(long_text), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'" + std::string(199, 'a'));
  // 198 characters: the repr is exactly 200, closing quote included.
  ExpectPyError(PyInt(Value::Str(std::string(198, 'b')), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'" + std::string(198, 'b') + "'");
  // 199 characters: the closing quote is cut.
  ExpectPyError(PyInt(Value::Str(std::string(199, 'c')), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'" + std::string(199, 'c'));
  // The limit counts repr characters, escapes included.
  ExpectPyError(
      PyInt(Value::Str(std::string(150, '\n')), "x"), PyErrorKind::kValueError,
      std::string(kInvalidLiteral) + "'" + [] {
        std::string s;
        for (int i = 0; i < 99; ++i) s += "\\n";
        return s + "\\";
      }());
}

TEST(PyIntTest, NonNumbersRaiseTypeError) {
  const std::string prefix =
      "int() argument must be a string, a bytes-like object or a real number, not ";
  ExpectPyError(PyInt(Value::None(), "max_seqlen"), PyErrorKind::kTypeError, prefix + "'NoneType'");
  ExpectPyError(PyInt(Value::List({Value::Int(1)}), "max_seqlen"), PyErrorKind::kTypeError,
                prefix + "'list'");
  ExpectPyError(PyInt(Value::Cache(std::make_shared<SingletonCache>()), "max_seqlen"),
                PyErrorKind::kTypeError, prefix + "'SingletonCache'");
}

TEST(PyIntTest, OneElementCudaTensorReadsThroughOneHostSync) {
  const Tensor t = Tensor::FromInts({4096}, DType::kInt64, Device::kCuda, Shape{});
  ScopedDeviceLedger ledger;
  absl::StatusOr<int64_t> result = PyInt(Value::FromTensor(t), "int(max_seqlen)");
  ASSERT_TRUE(result.ok()) << FormatPythonError(result.status());
  EXPECT_EQ(*result, 4096);
  EXPECT_THAT(ledger.events(),
              ElementsAre(DeviceEvent{DeviceEventKind::kHostSync, "int(max_seqlen)"}));
}

TEST(PyIntTest, OneElementCpuTensorNeedsNoSync) {
  ScopedDeviceLedger ledger;
  ExpectIntOk(Value::FromTensor(Tensor::FromInts({77}, DType::kInt32, Device::kCpu)), 77);
  ExpectIntOk(Value::FromTensor(Tensor::FromInts({1}, DType::kBool, Device::kCpu, Shape{})), 1);
  ExpectIntOk(Value::FromTensor(Tensor::FromInts({-2}, DType::kInt64, Device::kCpu, Shape{1, 1})),
              -2);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(PyIntTest, FloatTensorsTruncateLikeFloats) {
  ScopedDeviceLedger ledger;
  ExpectIntOk(Value::FromTensor(Tensor::FromDoubles({5.9}, DType::kFloat32, Device::kCuda)), 5);
  ExpectIntOk(Value::FromTensor(Tensor::FromDoubles({-5.9}, DType::kBFloat16, Device::kCuda)), -5);
  ExpectIntOk(Value::FromTensor(Tensor::FromDoubles({1023.9}, DType::kFloat64, Device::kCpu)),
              1023);
  EXPECT_EQ(ledger.counts().host_syncs, 2);
}

TEST(PyIntTest, NonFiniteFloatTensors) {
  ScopedDeviceLedger ledger;
  ExpectPyError(PyInt(Value::FromTensor(Tensor::FromDoubles({std::nan("")}, DType::kFloat16,
                                                            Device::kCuda, Shape{})),
                      "x"),
                PyErrorKind::kValueError, "cannot convert float NaN to integer");
  ExpectPyError(
      PyInt(Value::FromTensor(Tensor::FromDoubles({70000.0}, DType::kFloat16, Device::kCuda)), "x"),
      PyErrorKind::kOverflowError, "cannot convert float infinity to integer");
  EXPECT_EQ(ledger.counts().host_syncs, 2);  // the value had to be read
}

TEST(PyIntTest, MultiElementTensorsRaiseValueErrorWithoutASync) {
  ScopedDeviceLedger ledger;
  const char* message = "only one element tensors can be converted to Python scalars";
  ExpectPyError(
      PyInt(Value::FromTensor(Tensor::FromInts({1, 2}, DType::kInt32, Device::kCuda)), "x"),
      PyErrorKind::kValueError, message);
  ExpectPyError(PyInt(Value::FromTensor(Tensor::FromInts({}, DType::kInt64, Device::kCuda)), "x"),
                PyErrorKind::kValueError, message);
  ExpectPyError(
      PyInt(Value::FromTensor(Tensor::FromDoubles({1.0, 2.0}, DType::kFloat32, Device::kCpu)), "x"),
      PyErrorKind::kValueError, message);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(PyIntTest, NonTensorConversionsRecordNothing) {
  ScopedDeviceLedger ledger;
  ExpectIntOk(Value::Str("12"), 12);
  ExpectIntOk(Value::Float(1.5), 1);
  ExpectIntOk(Value::Int(3), 3);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

}  // namespace
}  // namespace varlen
