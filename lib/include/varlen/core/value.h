// File: varlen/core/value.h
// -----------------------------------------------------------------------------
//
// Value and Kwargs model the Python arguments a vision attention backend
// receives, exactly enough to reproduce SGLang's behaviour:
//
//   * Value is one Python object: None, bool, int, float, str, a Tensor, a
//     list, or a SingletonCache (SGLang's lazy cu_seqlens holder). Tensors and
//     caches have reference semantics, like Python objects.
//   * Kwargs is an ordered keyword-argument dict. A key that is absent is not
//     the same as a key whose value is None: SGLang's flashinfer_cudnn backend
//     checks `"sequence_lengths" not in kwargs`, and the attention layer always
//     passes the key (possibly as None), so the two paths fail differently.
//
// PyInt() is Python's int() on a Value, with Python's exact error messages.

#ifndef VARLEN_CORE_VALUE_H_
#define VARLEN_CORE_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/core/tensor.h"

namespace varlen {

// SGLang's SingletonCache: a holder whose `data` is filled lazily and which
// caches the max sequence length it computed (`_max_seqlen`). set_data()
// clears the cache.
struct SingletonCache {
  std::optional<Tensor> data;
  std::optional<int64_t> max_seqlen;

  void set_data(Tensor tensor) {
    data = std::move(tensor);
    max_seqlen.reset();
  }
};

class Value {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kTensor, kList, kSingletonCache };

  Value() = default;  // None
  static Value None() { return Value(); }
  static Value Bool(bool b) { return Value(std::in_place_index<1>, b); }
  static Value Int(int64_t i) { return Value(std::in_place_index<2>, i); }
  static Value Float(double d) { return Value(std::in_place_index<3>, d); }
  static Value Str(std::string s) { return Value(std::in_place_index<4>, std::move(s)); }
  static Value FromTensor(Tensor t) { return Value(std::in_place_index<5>, std::move(t)); }
  static Value List(std::vector<Value> items) {
    return Value(std::in_place_index<6>, std::move(items));
  }
  static Value Cache(std::shared_ptr<SingletonCache> cache) {
    return Value(std::in_place_index<7>, std::move(cache));
  }

  Kind kind() const { return static_cast<Kind>(rep_.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_tensor() const { return kind() == Kind::kTensor; }

  // REQUIRES: the matching kind().
  bool as_bool() const { return std::get<1>(rep_); }
  int64_t as_int() const { return std::get<2>(rep_); }
  double as_float() const { return std::get<3>(rep_); }
  const std::string& as_str() const { return std::get<4>(rep_); }
  const Tensor& as_tensor() const { return std::get<5>(rep_); }
  const std::vector<Value>& as_list() const { return std::get<6>(rep_); }
  const std::shared_ptr<SingletonCache>& as_cache() const { return std::get<7>(rep_); }

  // Python's type(x).__name__: "NoneType", "bool", "int", "float", "str",
  // "Tensor", "list", "SingletonCache".
  absl::string_view TypeName() const;

  // Python's repr(x) for scalars and lists; tensors print DebugString().
  std::string Repr() const;

 private:
  using Rep = std::variant<std::monostate, bool, int64_t, double, std::string, Tensor,
                           std::vector<Value>, std::shared_ptr<SingletonCache>>;
  // Built in place: moving a whole variant in makes GCC 12 warn that the
  // list alternative may be uninitialized.
  template <size_t kIndex, typename Arg>
  Value(std::in_place_index_t<kIndex> index, Arg&& arg) : rep_(index, std::forward<Arg>(arg)) {}
  Rep rep_;
};

// An ordered keyword-argument dict with Python's absent-versus-None
// distinction.
class Kwargs {
 public:
  Kwargs() = default;
  Kwargs(std::initializer_list<std::pair<std::string, Value>> items);

  bool contains(absl::string_view key) const { return find(key) != nullptr; }
  // The value of `key`, or nullptr when the key is absent.
  const Value* find(absl::string_view key) const;
  // kwargs.get(key): None when absent.
  Value get(absl::string_view key) const;
  // Inserts or replaces, keeping the first insertion's position.
  void set(absl::string_view key, Value value);
  void erase(absl::string_view key);

  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

// Python's repr() of a str: single quotes unless the text holds a single
// quote and no double quote; backslash escapes for \\, \n, \r, \t and
// code points that are not str.isprintable() (\xhh, \uhhhh, \Uhhhhhhhh).
// `text` is UTF-8; a byte that is not part of well-formed UTF-8 stands for
// U+DC80..U+DCFF, as Python's "surrogateescape" decoding reads it.
std::string PyStrRepr(absl::string_view text);

// Python's repr() of a float ("5.9", "1e+16", "inf", "nan").
std::string PyFloatRepr(double value);

// Python's int(x) for x of any kind, with Python's messages:
//   bool -> 0/1; float -> truncated toward zero (OverflowError for inf,
//   ValueError for nan); str -> base-10 literal with optional sign,
//   surrounding whitespace and single underscores between digits, else
//   ValueError("invalid literal for int() with base 10: '...'"), and
//   ValueError for more than 4300 digits (sys.get_int_max_str_digits());
//   None, list, SingletonCache -> TypeError. Values outside int64 raise
//   OverflowError (Python ints are unbounded; the backends' C++ entry points
//   are not).
// Non-ASCII text is modelled as CPython 3.11 (Unicode 14.0) reads it:
// decimal digits of any script are digits, Unicode whitespace is space, and
// the message's repr escapes non-printable code points.
// A Tensor argument is converted through .item(), as torch does for a
// one-element tensor.
absl::StatusOr<int64_t> PyInt(const Value& value, absl::string_view what);

}  // namespace varlen

#endif  // VARLEN_CORE_VALUE_H_
