// Tests for Value, Kwargs, SingletonCache, Python reprs and PyInt (int()).

#include "varlen/core/value.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

TEST(ValueReprTest, NonPrintableCodePointsAreEscapedLikePython) {
  // Expected values are CPython 3.11's repr(). Separators, format and
  // private-use characters and unassigned code points are escaped in the
  // shortest of \xhh, \uhhhh and \Uhhhhhhhh.
  EXPECT_EQ(PyStrRepr("\u2028"), "'\\u2028'");
  EXPECT_EQ(PyStrRepr("\u00a0"), "'\\xa0'");
  EXPECT_EQ(PyStrRepr("\u0085"), "'\\x85'");
  EXPECT_EQ(PyStrRepr("\ue000"), "'\\ue000'");
  EXPECT_EQ(PyStrRepr("\xcd\xb8"), "'\\u0378'");  // U+0378, unassigned
  EXPECT_EQ(PyStrRepr("\U000e0001"), "'\\U000e0001'");
  EXPECT_EQ(PyStrRepr("\U0010ffff"), "'\\U0010ffff'");
  EXPECT_EQ(PyStrRepr("\u200b5"), "'\\u200b5'");
  // Printable non-ASCII text is kept as it is.
  EXPECT_EQ(PyStrRepr("\u00e9\u0664 \U0001f600"), "'\u00e9\u0664 \U0001f600'");
  EXPECT_EQ(Value::Str("it's \u0664").Repr(), "\"it's \u0664\"");
}

TEST(ValueReprTest, BytesThatAreNotUtf8ReadAsSurrogateEscapes) {
  // bytes.decode("utf-8", "surrogateescape"): one U+DCxx per stray byte.
  EXPECT_EQ(PyStrRepr("\xe4"), "'\\udce4'");
  EXPECT_EQ(PyStrRepr("5\xff"), "'5\\udcff'");
  EXPECT_EQ(PyStrRepr("\xc0\x80"), "'\\udcc0\\udc80'");                        // overlong
  EXPECT_EQ(PyStrRepr("\xed\xa0\x80"), "'\\udced\\udca0\\udc80'");             // a surrogate
  EXPECT_EQ(PyStrRepr("\xe4\xb8-"), "'\\udce4\\udcb8-'");                      // truncated
  EXPECT_EQ(PyStrRepr("\xf4\x90\x80\x80"), "'\\udcf4\\udc90\\udc80\\udc80'");  // > U+10FFFF
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

// Non-ASCII text: every expected value below was observed with CPython 3.11.

TEST(PyIntTest, DecimalDigitsOfEveryScript) {
  ExpectIntOk(Value::Str("\u0664\u0660\u0669\u0666"), 4096);  // Arabic-Indic
  ExpectIntOk(Value::Str("\u096a\u0966\u096f\u096c"), 4096);  // Devanagari
  ExpectIntOk(Value::Str("\uff14\uff10\uff19\uff16"), 4096);  // fullwidth
  ExpectIntOk(Value::Str("\U0001d7d2\U0001d7ce"), 40);        // mathematical bold
  ExpectIntOk(Value::Str("4\u0660"), 40);                     // mixed scripts
  ExpectIntOk(Value::Str("-\u0664_\u0662"), -42);
  ExpectIntOk(Value::Str(std::string(4300, '0')), 0);
  ExpectPyError(PyInt(Value::Str("\u0669\u0662\u0662\u0663\u0663\u0667\u0662\u0660\u0663\u0666"
                                 "\u0668\u0665\u0664\u0667\u0667\u0665\u0668\u0660\u0668"),
                      "x"),
                PyErrorKind::kOverflowError, kTooLarge);  // 2^63
}

TEST(PyIntTest, UnicodeWhitespaceIsStrippedAtBothEnds) {
  ExpectIntOk(Value::Str("\u00a04096\u3000"), 4096);
  ExpectIntOk(Value::Str("\u2003-17\u2029"), -17);
  ExpectIntOk(Value::Str("\u0085 5\u0085"), 5);
  ExpectIntOk(Value::Str("\u16805\u2028"), 5);
}

TEST(PyIntTest, NonAsciiTextThatIsNotALiteral) {
  struct Case {
    const char* text;
    const char* repr;
  };
  const Case cases[] = {
      {"4\u00a0096", "'4\\xa0096'"},           // a space inside
      {"4\u00b2", "'4\u00b2'"},                // superscript two is not decimal
      {"\u0661__\u0660", "'\u0661__\u0660'"},  // underscores as in ASCII
      {"\u0664\u00e9", "'\u0664\u00e9'"},      // a letter after a digit
      {"\u200b5", "'\\u200b5'"},               // zero width space is no space
      {"\u180e5", "'\\u180e5'"},               // nor is the Mongolian vowel separator
      {"\u2028", "'\\u2028'"},                 // only space
      {"\U0001f600", "'\U0001f600'"},
      {"\x1c\u0664", "'\\x1c\u0664'"},  // \x1c stays \x1c, never ' '
      {"5\x7f\u00e9", "'5\\x7f\u00e9'"},
      {"5\xff", "'5\\udcff'"},  // not UTF-8
  };
  for (const Case& c : cases) {
    ExpectPyError(PyInt(Value::Str(c.text), "max_seqlen"), PyErrorKind::kValueError,
                  std::string(kInvalidLiteral) + c.repr);
  }
}

TEST(PyIntTest, InformationSeparatorsAreNeverStripped) {
  // U+001C..U+001F are str.isspace() but below 127, so int() keeps them.
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x1c") + "5", "'\\x1c5'"},
      {"5\x1d", "'5\\x1d'"},
      {"\x1e", "'\\x1e'"},
      {"\u00a05\x1f", "'\\xa05\\x1f'"},
  };
  for (const auto& [text, repr] : cases) {
    ExpectPyError(PyInt(Value::Str(text), "x"), PyErrorKind::kValueError,
                  std::string(kInvalidLiteral) + repr);
  }
}

TEST(PyIntTest, MoreThan4300DigitsExceedTheLimit) {
  const auto limit = [](int digits) {
    return absl::StrCat("Exceeds the limit (4300 digits) for integer string conversion: value has ",
                        digits, " digits; use sys.set_int_max_str_digits() to increase the limit");
  };
  // 4300 digits convert (and then do not fit in int64).
  ExpectPyError(PyInt(Value::Str(std::string(4300, '1')), "x"), PyErrorKind::kOverflowError,
                kTooLarge);
  ExpectPyError(PyInt(Value::Str(std::string(4301, '1')), "x"), PyErrorKind::kValueError,
                limit(4301));
  ExpectPyError(PyInt(Value::Str(std::string(5000, '9')), "x"), PyErrorKind::kValueError,
                limit(5000));
  // Leading zeros count; underscores, the sign and spaces do not.
  ExpectPyError(PyInt(Value::Str(std::string(4301, '0')), "x"), PyErrorKind::kValueError,
                limit(4301));
  std::string underscored;
  for (int i = 0; i < 4300; ++i) underscored += "1_";
  ExpectPyError(PyInt(Value::Str(" -" + underscored + "1 "), "x"), PyErrorKind::kValueError,
                limit(4301));
  // Digits of other scripts count one each.
  std::string arabic;
  for (int i = 0; i < 4301; ++i) arabic += "\u0660";
  ExpectPyError(PyInt(Value::Str(arabic), "x"), PyErrorKind::kValueError, limit(4301));
  // The limit is checked before what follows the digits...
  ExpectPyError(PyInt(Value::Str("-" + arabic + "x"), "x"), PyErrorKind::kValueError, limit(4301));
  ExpectPyError(PyInt(Value::Str(std::string(4301, '1') + " \u00e9"), "x"),
                PyErrorKind::kValueError, limit(4301));
  // ... but after a misplaced underscore, and only on the leading digits.
  ExpectPyError(PyInt(Value::Str(std::string(4301, '1') + "_"), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'" + std::string(199, '1'));
  ExpectPyError(PyInt(Value::Str(std::string(4301, '1') + "__1"), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'" + std::string(199, '1'));
  ExpectPyError(PyInt(Value::Str("x" + std::string(4301, '1')), "x"), PyErrorKind::kValueError,
                std::string(kInvalidLiteral) + "'x" + std::string(198, '1'));
}

TEST(PyIntTest, ReprCutCountsCharactersOfMultiByteText) {
  std::string accents;
  for (int i = 0; i < 300; ++i) accents += "\u00e9";
  std::string expected = std::string(kInvalidLiteral) + "'";
  for (int i = 0; i < 199; ++i) expected += "\u00e9";
  ExpectPyError(PyInt(Value::Str(accents), "x"), PyErrorKind::kValueError, expected);

  // Escapes count one character per byte of the escape.
  std::string separators;
  for (int i = 0; i < 100; ++i) separators += "\u2028";
  expected = std::string(kInvalidLiteral) + "'";
  for (int i = 0; i < 33; ++i) expected += "\\u2028";
  ExpectPyError(PyInt(Value::Str(separators), "x"), PyErrorKind::kValueError, expected + "\\");

  // Four-byte characters count one each.
  std::string mixed(150, 'a');
  for (int i = 0; i < 100; ++i) mixed += "\U0001f600";
  expected = std::string(kInvalidLiteral) + "'" + std::string(150, 'a');
  for (int i = 0; i < 49; ++i) expected += "\U0001f600";
  ExpectPyError(PyInt(Value::Str(mixed), "x"), PyErrorKind::kValueError, expected);
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
