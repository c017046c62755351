#include "varlen/cases/case_json.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "case_rules.h"
#include "varlen/cases/engine_calls.h"
#include "varlen/cases/limits.h"
#include "varlen/cases/synth.h"

namespace varlen {
namespace {

using internal::CheckRange;
using internal::PathError;
using internal::RowsOfGeometry;
using internal::ValidateArg;

// Objects keep their keys in file order (keyword arguments are ordered).
using json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------
// Reading: every accessor knows the JSON path it reads, so errors name it.

std::string Describe(const json& j) {
  std::string text = j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return absl::StrCat(j.type_name(), " ", text);
}

absl::Status Expected(absl::string_view path, absl::string_view what, const json& got) {
  return PathError(path, absl::StrCat("expected ", what, ", got ", Describe(got)));
}

absl::StatusOr<int64_t> ReadInt(const json& j, absl::string_view path) {
  if (!j.is_number_integer()) return Expected(path, "an integer", j);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return PathError(path, absl::StrCat(j.dump(), " does not fit in a 64-bit signed integer"));
  }
  return j.get<int64_t>();
}

absl::StatusOr<std::string> ReadString(const json& j, absl::string_view path) {
  if (!j.is_string()) return Expected(path, "a string", j);
  return j.get<std::string>();
}

absl::StatusOr<bool> ReadBool(const json& j, absl::string_view path) {
  if (!j.is_boolean()) return Expected(path, "true or false", j);
  return j.get<bool>();
}

// A finite number, or one of the strings "nan", "inf", "-inf".
absl::StatusOr<double> ReadDouble(const json& j, absl::string_view path) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return Expected(path, "a number or one of \"nan\", \"inf\", \"-inf\"", j);
}

template <typename T>
absl::StatusOr<T> WithPath(absl::StatusOr<T> parsed, absl::string_view path) {
  if (!parsed.ok()) return PathError(path, parsed.status().message());
  return parsed;
}

// Reads the fields of one JSON object. The keys it may hold are declared up
// front, so a misspelt key is reported as unknown before anything else.
class ObjectReader {
 public:
  static absl::StatusOr<ObjectReader> Open(const json& j, std::string path,
                                           absl::Span<const absl::string_view> allowed) {
    if (!j.is_object()) return Expected(path, "an object", j);
    ObjectReader reader(j, std::move(path));
    VARLEN_RETURN_IF_ERROR(reader.OnlyKeys(allowed));
    return reader;
  }

  const std::string& path() const { return path_; }
  std::string Path(absl::string_view key) const { return absl::StrCat(path_, ".", key); }

  // Narrows the allowed keys further (an error names the first other key).
  absl::Status OnlyKeys(absl::Span<const absl::string_view> allowed) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
        return PathError(
            Path(it.key()),
            absl::StrCat("unknown field (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  // The field, or nullptr when absent.
  const json* Optional(absl::string_view key) const {
    auto it = j_.find(std::string(key));
    return it == j_.end() ? nullptr : &*it;
  }

  absl::StatusOr<const json*> Required(absl::string_view key) const {
    const json* field = Optional(key);
    if (field == nullptr) return PathError(Path(key), "required field is missing");
    return field;
  }

 private:
  ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}
  const json& j_;
  std::string path_;
};

absl::StatusOr<TensorLiteral> ReadTensorLiteral(const ObjectReader& r, const json& values) {
  TensorLiteral t;
  VARLEN_ASSIGN_OR_RETURN(const json* dtype, r.Required("dtype"));
  VARLEN_ASSIGN_OR_RETURN(std::string dtype_name, ReadString(*dtype, r.Path("dtype")));
  VARLEN_ASSIGN_OR_RETURN(t.dtype, WithPath(ParseDType(dtype_name), r.Path("dtype")));
  VARLEN_ASSIGN_OR_RETURN(const json* device, r.Required("device"));
  VARLEN_ASSIGN_OR_RETURN(std::string device_name, ReadString(*device, r.Path("device")));
  VARLEN_ASSIGN_OR_RETURN(t.device, WithPath(ParseDevice(device_name), r.Path("device")));
  if (const json* shape = r.Optional("shape")) {
    if (!shape->is_array()) return Expected(r.Path("shape"), "an array of sizes", *shape);
    Shape dims;
    for (size_t i = 0; i < shape->size(); ++i) {
      const std::string path = absl::StrCat(r.Path("shape"), "[", i, "]");
      VARLEN_ASSIGN_OR_RETURN(int64_t d, ReadInt((*shape)[i], path));
      if (d < 0 || d > kMaxLiteralValues) {
        return PathError(path, absl::StrCat(d, " is not a size in [0, ", kMaxLiteralValues, "]"));
      }
      dims.push_back(d);
    }
    t.shape = dims;
  }
  if (const json* step = r.Optional("step")) {
    VARLEN_ASSIGN_OR_RETURN(t.step, ReadInt(*step, r.Path("step")));
  }
  const std::string values_path = r.Path("tensor");
  if (!values.is_array()) return Expected(values_path, "an array of values", values);
  if (static_cast<int64_t>(values.size()) > kMaxLiteralValues) {
    return PathError(values_path, absl::StrCat(values.size(), " values exceed the limit of ",
                                               kMaxLiteralValues, " per literal tensor"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string path = absl::StrCat(values_path, "[", i, "]");
    if (IsFloatingPoint(t.dtype)) {
      VARLEN_ASSIGN_OR_RETURN(double v, ReadDouble(values[i], path));
      t.floats.push_back(v);
    } else if (t.dtype == DType::kBool) {
      VARLEN_ASSIGN_OR_RETURN(bool v, ReadBool(values[i], path));
      t.ints.push_back(v ? 1 : 0);
    } else {
      VARLEN_ASSIGN_OR_RETURN(int64_t v, ReadInt(values[i], path));
      t.ints.push_back(v);
    }
  }
  return t;
}

constexpr int kMaxNesting = 8;

absl::StatusOr<ArgLiteral> ReadArg(const json& j, const std::string& path, int depth = 0) {
  if (depth > kMaxNesting) {
    return PathError(path, absl::StrCat("values nest deeper than ", kMaxNesting, " levels"));
  }
  ArgLiteral a;
  switch (j.type()) {
    case json::value_t::null:
      return a;
    case json::value_t::boolean:
      a.kind = ArgLiteral::Kind::kBool;
      a.b = j.get<bool>();
      return a;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: {
      VARLEN_ASSIGN_OR_RETURN(int64_t v, ReadInt(j, path));
      return ArgLiteral::Int(v);
    }
    case json::value_t::number_float:
      return ArgLiteral::Float(j.get<double>());
    case json::value_t::string:
      return ArgLiteral::Str(j.get<std::string>());
    case json::value_t::array: {
      a.kind = ArgLiteral::Kind::kList;
      for (size_t i = 0; i < j.size(); ++i) {
        VARLEN_ASSIGN_OR_RETURN(ArgLiteral item,
                                ReadArg(j[i], absl::StrCat(path, "[", i, "]"), depth + 1));
        a.list.push_back(std::move(item));
      }
      return a;
    }
    case json::value_t::object:
      break;
    default:
      return Expected(path, "a value", j);
  }
  VARLEN_ASSIGN_OR_RETURN(ObjectReader r,
                          ObjectReader::Open(j, path,
                                             {"tensor", "dtype", "device", "shape", "step", "float",
                                              "singleton_cache", "empty_like"}));
  if (const json* values = r.Optional("tensor")) {
    VARLEN_RETURN_IF_ERROR(r.OnlyKeys({"tensor", "dtype", "device", "shape", "step"}));
    VARLEN_ASSIGN_OR_RETURN(a.tensor, ReadTensorLiteral(r, *values));
    a.kind = ArgLiteral::Kind::kTensor;
  } else if (const json* f = r.Optional("float")) {
    VARLEN_RETURN_IF_ERROR(r.OnlyKeys({"float"}));
    VARLEN_ASSIGN_OR_RETURN(a.f, ReadDouble(*f, r.Path("float")));
    a.kind = ArgLiteral::Kind::kFloat;
  } else if (const json* cache = r.Optional("singleton_cache")) {
    VARLEN_RETURN_IF_ERROR(r.OnlyKeys({"singleton_cache"}));
    a.kind = ArgLiteral::Kind::kSingletonCache;
    if (!cache->is_null()) {
      VARLEN_ASSIGN_OR_RETURN(ObjectReader data,
                              ObjectReader::Open(*cache, r.Path("singleton_cache"),
                                                 {"tensor", "dtype", "device", "shape", "step"}));
      VARLEN_ASSIGN_OR_RETURN(const json* cached_values, data.Required("tensor"));
      VARLEN_ASSIGN_OR_RETURN(a.tensor, ReadTensorLiteral(data, *cached_values));
      a.cache_has_data = true;
    }
  } else if (const json* like = r.Optional("empty_like")) {
    VARLEN_RETURN_IF_ERROR(r.OnlyKeys({"empty_like"}));
    if (!like->is_string() || like->get<std::string>() != "q") {
      return Expected(r.Path("empty_like"), "\"q\"", *like);
    }
    a.kind = ArgLiteral::Kind::kEmptyLikeQ;
  } else {
    return PathError(path,
                     "an object value must have one of the keys tensor, float, singleton_cache, "
                     "empty_like");
  }
  return a;
}

// Reads an optional value field; absent means None.
absl::Status ReadOptionalArg(const ObjectReader& r, absl::string_view key, ArgLiteral* out) {
  if (const json* field = r.Optional(key)) {
    VARLEN_ASSIGN_OR_RETURN(*out, ReadArg(*field, r.Path(key)));
  }
  return absl::OkStatus();
}

template <typename Enum>
absl::Status ReadEnum(const ObjectReader& r, absl::string_view key, bool required,
                      absl::StatusOr<Enum> (*parse)(absl::string_view), Enum* out) {
  const json* field = r.Optional(key);
  if (field == nullptr) {
    return required ? PathError(r.Path(key), "required field is missing") : absl::OkStatus();
  }
  VARLEN_ASSIGN_OR_RETURN(std::string name, ReadString(*field, r.Path(key)));
  VARLEN_ASSIGN_OR_RETURN(*out, WithPath(parse(name), r.Path(key)));
  return absl::OkStatus();
}

// The geometry's "window": [left, right], "causal": true (a right bound of
// 0) and "sinks": [one per query head].
absl::Status ReadVariant(ObjectReader& r, AttentionVariant* variant) {
  if (const json* window = r.Optional("window")) {
    if (!window->is_array() || window->size() != 2) {
      return Expected(r.Path("window"), "[left, right], each -1 (no bound) or a count of tokens",
                      *window);
    }
    VARLEN_ASSIGN_OR_RETURN(variant->window_left, ReadInt((*window)[0], r.Path("window") + "[0]"));
    VARLEN_ASSIGN_OR_RETURN(variant->window_right, ReadInt((*window)[1], r.Path("window") + "[1]"));
  }
  if (const json* causal = r.Optional("causal")) {
    VARLEN_ASSIGN_OR_RETURN(const bool is_causal, ReadBool(*causal, r.Path("causal")));
    if (is_causal) {
      if (variant->window_right > 0) {
        return PathError(r.Path("causal"),
                         absl::StrCat("causal attention is a right bound of 0, and window[1] is ",
                                      variant->window_right));
      }
      variant->window_right = 0;
    }
  }
  if (const json* sinks = r.Optional("sinks")) {
    if (!sinks->is_array()) {
      return Expected(r.Path("sinks"), "an array of one logit per query head", *sinks);
    }
    for (size_t i = 0; i < sinks->size(); ++i) {
      const std::string path = absl::StrCat(r.Path("sinks"), "[", i, "]");
      VARLEN_ASSIGN_OR_RETURN(const double sink, ReadDouble((*sinks)[i], path));
      if (std::isnan(sink) || sink == std::numeric_limits<double>::infinity() ||
          (std::isfinite(sink) && std::fabs(sink) > std::numeric_limits<float>::max())) {
        return PathError(path, absl::StrCat(PyFloatRepr(sink),
                                            ": a sink is a float32 logit, or \"-inf\" for none"));
      }
      variant->sinks.push_back(static_cast<float>(sink));
    }
  }
  return absl::OkStatus();
}

// The geometry's "padding": N rows after the last sequence, or one count per
// gap (before the first sequence, then after each). No padding reads as none.
absl::Status ReadPadding(ObjectReader& r, size_t sequences, std::vector<int64_t>* padding) {
  const json* spelled = r.Optional("padding");
  if (spelled == nullptr) return absl::OkStatus();
  const std::string path = r.Path("padding");
  if (spelled->is_array()) {
    if (spelled->size() != sequences + 1) {
      return PathError(path, absl::StrCat(spelled->size(), " counts for ", sequences,
                                          " sequences: one per gap, before the first sequence "
                                          "and after each (or one integer: rows after the last)"));
    }
    for (size_t i = 0; i < spelled->size(); ++i) {
      VARLEN_ASSIGN_OR_RETURN(const int64_t rows,
                              ReadInt((*spelled)[i], absl::StrCat(path, "[", i, "]")));
      padding->push_back(rows);
    }
  } else if (spelled->is_number_integer()) {
    padding->assign(sequences + 1, 0);
    VARLEN_ASSIGN_OR_RETURN(padding->back(), ReadInt(*spelled, path));
  } else {
    return Expected(path, "rows after the last sequence, or [before the first, after each]",
                    *spelled);
  }
  if (std::all_of(padding->begin(), padding->end(), [](int64_t n) { return n == 0; })) {
    padding->clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<Geometry> ReadGeometry(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(j, path,
                         {"seq_lens", "num_heads", "num_kv_heads", "head_dim", "head_dim_v",
                          "dtype", "softmax_scale", "causal", "window", "sinks", "padding"}));
  Geometry g;
  VARLEN_ASSIGN_OR_RETURN(const json* lens, r.Required("seq_lens"));
  if (!lens->is_array()) return Expected(r.Path("seq_lens"), "an array of token counts", *lens);
  if (static_cast<int64_t>(lens->size()) > kMaxSequences) {
    return PathError(r.Path("seq_lens"),
                     absl::StrCat(lens->size(), " sequences exceed the limit of ", kMaxSequences));
  }
  for (size_t i = 0; i < lens->size(); ++i) {
    VARLEN_ASSIGN_OR_RETURN(int64_t n,
                            ReadInt((*lens)[i], absl::StrCat(r.Path("seq_lens"), "[", i, "]")));
    g.seq_lens.push_back(n);
  }
  VARLEN_ASSIGN_OR_RETURN(const json* heads, r.Required("num_heads"));
  VARLEN_ASSIGN_OR_RETURN(g.num_heads, ReadInt(*heads, r.Path("num_heads")));
  g.num_kv_heads = g.num_heads;
  if (const json* kv = r.Optional("num_kv_heads")) {
    VARLEN_ASSIGN_OR_RETURN(g.num_kv_heads, ReadInt(*kv, r.Path("num_kv_heads")));
  }
  VARLEN_ASSIGN_OR_RETURN(const json* dim, r.Required("head_dim"));
  VARLEN_ASSIGN_OR_RETURN(g.head_dim, ReadInt(*dim, r.Path("head_dim")));
  g.head_dim_v = g.head_dim;
  if (const json* dv = r.Optional("head_dim_v")) {
    VARLEN_ASSIGN_OR_RETURN(g.head_dim_v, ReadInt(*dv, r.Path("head_dim_v")));
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "dtype", true, &ParseDType, &g.dtype));
  if (const json* scale = r.Optional("softmax_scale")) {
    VARLEN_ASSIGN_OR_RETURN(g.softmax_scale, ReadDouble(*scale, r.Path("softmax_scale")));
  }
  VARLEN_RETURN_IF_ERROR(ReadVariant(r, &g.variant));
  VARLEN_RETURN_IF_ERROR(ReadPadding(r, g.seq_lens.size(), &g.padding));
  return g;
}

absl::StatusOr<QkvFiles> ReadQkvFiles(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, path, {"q", "k", "v"}));
  QkvFiles files;
  for (auto [key, name] :
       {std::pair<const char*, std::string*>{"q", &files.q}, {"k", &files.k}, {"v", &files.v}}) {
    VARLEN_ASSIGN_OR_RETURN(const json* file, r.Required(key));
    VARLEN_ASSIGN_OR_RETURN(*name, ReadString(*file, r.Path(key)));
    if (name->empty()) return PathError(r.Path(key), "an empty file name");
  }
  return files;
}

absl::StatusOr<DataSpec> ReadData(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(ObjectReader r,
                          ObjectReader::Open(j, path, {"seed", "distribution", "files"}));
  DataSpec d;
  if (const json* files = r.Optional("files")) {
    if (r.Optional("seed") != nullptr || r.Optional("distribution") != nullptr) {
      return PathError(r.Path("files"),
                       "q, k and v come from the files, so seed and distribution must be absent");
    }
    VARLEN_ASSIGN_OR_RETURN(d.files, ReadQkvFiles(*files, r.Path("files")));
    return d;
  }
  if (const json* seed = r.Optional("seed")) {
    if (!seed->is_number_integer() ||
        (seed->is_number_integer() && !seed->is_number_unsigned() && seed->get<int64_t>() < 0)) {
      return Expected(r.Path("seed"), "an integer in [0, 2^64)", *seed);
    }
    d.seed = seed->get<uint64_t>();
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "distribution", false, &ParseDistribution, &d.distribution));
  return d;
}

absl::StatusOr<MetadataSpec::Builder> ParseBuilder(absl::string_view name) {
  for (auto b : {MetadataSpec::Builder::kPlain, MetadataSpec::Builder::kFlashinferCudnn,
                 MetadataSpec::Builder::kManual}) {
    if (MetadataBuilderName(b) == name) return b;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("builder \"", name, "\" is not one of plain, flashinfer_cudnn, manual"));
}

absl::StatusOr<MetadataSpec> ReadMetadata(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(ObjectReader r,
                          ObjectReader::Open(j, path,
                                             {"builder", "device", "cu_seqlens", "elem_per_token",
                                              "seq_lens", "max_seqlen", "packed_indptrs",
                                              "sequence_lengths", "flashinfer_max_seqlen"}));
  MetadataSpec m;
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "builder", true, &ParseBuilder, &m.builder));
  switch (m.builder) {
    case MetadataSpec::Builder::kFlashinferCudnn:
      VARLEN_RETURN_IF_ERROR(r.OnlyKeys({"builder", "device", "cu_seqlens", "elem_per_token"}));
      break;
    case MetadataSpec::Builder::kPlain:
      VARLEN_RETURN_IF_ERROR(
          r.OnlyKeys({"builder", "device", "cu_seqlens", "max_seqlen", "packed_indptrs",
                      "sequence_lengths", "flashinfer_max_seqlen"}));
      break;
    case MetadataSpec::Builder::kManual:
      VARLEN_RETURN_IF_ERROR(
          r.OnlyKeys({"builder", "device", "cu_seqlens", "seq_lens", "max_seqlen", "packed_indptrs",
                      "sequence_lengths", "flashinfer_max_seqlen"}));
      break;
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "device", false, &ParseDevice, &m.device));
  VARLEN_ASSIGN_OR_RETURN(const json* cu, r.Required("cu_seqlens"));
  VARLEN_ASSIGN_OR_RETURN(m.cu_seqlens, ReadArg(*cu, r.Path("cu_seqlens")));
  switch (m.builder) {
    case MetadataSpec::Builder::kFlashinferCudnn: {
      VARLEN_ASSIGN_OR_RETURN(const json* elem, r.Required("elem_per_token"));
      VARLEN_ASSIGN_OR_RETURN(m.elem_per_token, ReadInt(*elem, r.Path("elem_per_token")));
      break;
    }
    case MetadataSpec::Builder::kManual:
      VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "seq_lens", &m.seq_lens));
      [[fallthrough]];
    case MetadataSpec::Builder::kPlain:
      VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "max_seqlen", &m.max_seqlen));
      VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "packed_indptrs", &m.packed_indptrs));
      VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "sequence_lengths", &m.sequence_lengths));
      VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "flashinfer_max_seqlen", &m.flashinfer_max_seqlen));
      break;
  }
  return m;
}

absl::StatusOr<VllmMetadataSpec> ReadVllmMetadata(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(
          j, path, {"cu_seqlens", "hidden_size", "tp_size", "fp8_padded_hidden_size", "device"}));
  VllmMetadataSpec m;
  VARLEN_ASSIGN_OR_RETURN(const json* cu, r.Required("cu_seqlens"));
  VARLEN_ASSIGN_OR_RETURN(m.cu_seqlens, ReadArg(*cu, r.Path("cu_seqlens")));
  if (const json* hidden = r.Optional("hidden_size")) {
    VARLEN_ASSIGN_OR_RETURN(m.hidden_size, ReadInt(*hidden, r.Path("hidden_size")));
  }
  if (const json* tp = r.Optional("tp_size")) {
    VARLEN_ASSIGN_OR_RETURN(m.tp_size, ReadInt(*tp, r.Path("tp_size")));
  }
  if (const json* fp8 = r.Optional("fp8_padded_hidden_size"); fp8 != nullptr && !fp8->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(m.fp8_padded_hidden_size,
                            ReadInt(*fp8, r.Path("fp8_padded_hidden_size")));
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "device", false, &ParseDevice, &m.device));
  return m;
}

// Each size defaults to Qwen2.5-VL's vision config.
absl::StatusOr<TowerWindows> ReadTowerWindows(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(j, path, {"window_size", "patch_size", "spatial_merge_size"}));
  TowerWindows w;
  for (auto [key, field] :
       {std::pair{"window_size", &w.window_size}, std::pair{"patch_size", &w.patch_size},
        std::pair{"spatial_merge_size", &w.spatial_merge_size}}) {
    const json* value = r.Optional(key);
    if (value == nullptr) continue;
    VARLEN_ASSIGN_OR_RETURN(*field, ReadInt(*value, r.Path(key)));
    if (*field < 1) {
      return PathError(r.Path(key), absl::StrCat(*field, " is below 1: a config size is positive"));
    }
  }
  if (w.cells_per_side() < 1) {
    return PathError(path, absl::StrCat("window_size // spatial_merge_size // patch_size is ",
                                        w.window_size, " // ", w.spatial_merge_size, " // ",
                                        w.patch_size, " = 0: a window must hold a merged cell"));
  }
  return w;
}

absl::StatusOr<CallSpec> ReadCall(const json& j, const std::string& path, Engine engine) {
  VARLEN_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(j, path,
                         {"profile", "entry", "graph_mode", "layout", "merged_heads", "rotary",
                          "windows", "qkv_device", "bsz", "seq_len", "cu_seqlens",
                          "forward_metadata", "vllm_metadata", "kwargs", "sdpa"}));
  CallSpec c;
  {
    VARLEN_ASSIGN_OR_RETURN(const json* profile, r.Required("profile"));
    VARLEN_ASSIGN_OR_RETURN(std::string name, ReadString(*profile, r.Path("profile")));
    VARLEN_ASSIGN_OR_RETURN(c.profile, WithPath(ParseProfile(name, engine), r.Path("profile")));
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "entry", false, &ParseEntry, &c.entry));
  if (const json* graph = r.Optional("graph_mode")) {
    VARLEN_ASSIGN_OR_RETURN(c.graph_mode, ReadBool(*graph, r.Path("graph_mode")));
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "layout", false, &ParseQLayout, &c.layout));
  if (const json* merged = r.Optional("merged_heads")) {
    VARLEN_ASSIGN_OR_RETURN(c.merged_heads, ReadBool(*merged, r.Path("merged_heads")));
  }
  if (const json* rotary = r.Optional("rotary")) {
    VARLEN_ASSIGN_OR_RETURN(c.rotary, ReadBool(*rotary, r.Path("rotary")));
  }
  if (const json* windows = r.Optional("windows"); windows != nullptr && !windows->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(c.windows, ReadTowerWindows(*windows, r.Path("windows")));
  }
  if (const json* device = r.Optional("qkv_device"); device != nullptr && !device->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(std::string name, ReadString(*device, r.Path("qkv_device")));
    VARLEN_ASSIGN_OR_RETURN(c.qkv_device, WithPath(ParseDevice(name), r.Path("qkv_device")));
  }
  if (const json* bsz = r.Optional("bsz")) {
    VARLEN_ASSIGN_OR_RETURN(c.bsz, ReadInt(*bsz, r.Path("bsz")));
  }
  if (const json* seq_len = r.Optional("seq_len")) {
    VARLEN_ASSIGN_OR_RETURN(c.seq_len, ReadInt(*seq_len, r.Path("seq_len")));
  }
  VARLEN_RETURN_IF_ERROR(ReadOptionalArg(r, "cu_seqlens", &c.cu_seqlens));
  if (const json* metadata = r.Optional("forward_metadata");
      metadata != nullptr && !metadata->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(c.forward_metadata,
                            ReadMetadata(*metadata, r.Path("forward_metadata")));
  }
  if (const json* metadata = r.Optional("vllm_metadata");
      metadata != nullptr && !metadata->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(c.vllm_metadata, ReadVllmMetadata(*metadata, r.Path("vllm_metadata")));
  }
  if (const json* kwargs = r.Optional("kwargs")) {
    if (!kwargs->is_object()) return Expected(r.Path("kwargs"), "an object", *kwargs);
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it) {
      VARLEN_ASSIGN_OR_RETURN(ArgLiteral value,
                              ReadArg(it.value(), absl::StrCat(r.Path("kwargs"), ".", it.key())));
      c.kwargs.emplace_back(it.key(), std::move(value));
    }
  }
  if (const json* sdpa = r.Optional("sdpa")) {
    VARLEN_ASSIGN_OR_RETURN(
        ObjectReader s,
        ObjectReader::Open(*sdpa, r.Path("sdpa"),
                           {"flatten_batch", "softmax_in_single_precision", "softmax_scale"}));
    if (const json* flatten = s.Optional("flatten_batch")) {
      VARLEN_ASSIGN_OR_RETURN(c.sdpa.flatten_batch, ReadBool(*flatten, s.Path("flatten_batch")));
    }
    if (const json* single = s.Optional("softmax_in_single_precision")) {
      VARLEN_ASSIGN_OR_RETURN(c.sdpa.softmax_in_single_precision,
                              ReadBool(*single, s.Path("softmax_in_single_precision")));
    }
    if (const json* scale = s.Optional("softmax_scale"); scale != nullptr && !scale->is_null()) {
      VARLEN_ASSIGN_OR_RETURN(c.sdpa.softmax_scale, ReadDouble(*scale, s.Path("softmax_scale")));
    }
  }
  return c;
}

absl::StatusOr<Expectation::Outcome> ParseOutcome(absl::string_view name) {
  for (auto o : {Expectation::Outcome::kError, Expectation::Outcome::kSuccess,
                 Expectation::Outcome::kSilentCorruption}) {
    if (ExpectedOutcomeName(o) == name) return o;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("outcome \"", name, "\" is not one of error, success, silent_corruption"));
}

absl::StatusOr<PyErrorKind> ParseErrorKind(absl::string_view name) {
  if (std::optional<PyErrorKind> kind = ParsePyErrorKind(name)) return *kind;
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", name, "\" is not a Python error kind this harness models (", PyErrorKindNames(), ")"));
}

absl::StatusOr<Expectation> ReadExpectation(const json& j, const std::string& path) {
  VARLEN_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(
          j, path, {"outcome", "error", "message", "host_syncs", "resolved", "unread_keywords"}));
  Expectation e;
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "outcome", true, &ParseOutcome, &e.outcome));
  const json* error = r.Optional("error");
  const json* message = r.Optional("message");
  if (e.outcome == Expectation::Outcome::kError) {
    if (error == nullptr) return PathError(r.Path("error"), "required when outcome is \"error\"");
    if (message == nullptr)
      return PathError(r.Path("message"), "required when outcome is \"error\"");
    VARLEN_ASSIGN_OR_RETURN(std::string kind, ReadString(*error, r.Path("error")));
    VARLEN_ASSIGN_OR_RETURN(e.error_kind, WithPath(ParseErrorKind(kind), r.Path("error")));
    VARLEN_ASSIGN_OR_RETURN(e.message, ReadString(*message, r.Path("message")));
  } else if (error != nullptr || message != nullptr) {
    return PathError(r.Path(error != nullptr ? "error" : "message"),
                     "only allowed when outcome is \"error\"");
  }
  if (const json* syncs = r.Optional("host_syncs")) {
    VARLEN_ASSIGN_OR_RETURN(int64_t n, ReadInt(*syncs, r.Path("host_syncs")));
    if (n < 0 || n > 1000) {
      return PathError(r.Path("host_syncs"), absl::StrCat(n, " is outside [0, 1000]"));
    }
    e.host_syncs = static_cast<int>(n);
  }
  if (const json* resolved = r.Optional("resolved")) {
    if (!resolved->is_object()) return Expected(r.Path("resolved"), "an object", *resolved);
    e.resolved = *resolved;
  }
  if (const json* unread = r.Optional("unread_keywords")) {
    if (!unread->is_array()) return Expected(r.Path("unread_keywords"), "an array", *unread);
    std::vector<std::string>& keys = e.unread_keywords.emplace();
    for (size_t i = 0; i < unread->size(); ++i) {
      VARLEN_ASSIGN_OR_RETURN(
          std::string key,
          ReadString((*unread)[i], absl::StrCat(r.Path("unread_keywords"), "[", i, "]")));
      keys.push_back(std::move(key));
    }
  }
  return e;
}

absl::StatusOr<Case> ReadCase(const json& j) {
  std::vector<absl::string_view> keys = {"name", "source", "description", "engine"};
  for (Engine engine : AllEngines()) keys.push_back(EngineName(engine));  // its version
  for (absl::string_view key :
       {"platform", "mode", "geometry", "data", "call", "warmup", "expect"}) {
    keys.push_back(key);
  }
  VARLEN_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "$", keys));
  Case c;
  VARLEN_ASSIGN_OR_RETURN(const json* name, r.Required("name"));
  VARLEN_ASSIGN_OR_RETURN(c.name, ReadString(*name, r.Path("name")));
  VARLEN_ASSIGN_OR_RETURN(const json* source, r.Required("source"));
  VARLEN_ASSIGN_OR_RETURN(c.source, ReadString(*source, r.Path("source")));
  if (const json* description = r.Optional("description")) {
    VARLEN_ASSIGN_OR_RETURN(c.description, ReadString(*description, r.Path("description")));
  }
  Engine engine = Engine::kSglang;
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "engine", false, &ParseEngine, &engine));
  // The version's key is its engine's name, and names the case's engine.
  for (Engine other : AllEngines()) {
    const EngineModel& model = ModelOf(other);
    const json* version = r.Optional(model.name);
    if (version == nullptr) continue;
    const std::string path = r.Path(model.name);
    if (other != engine) {
      return PathError(path, absl::StrCat("a version of ", model.title, " needs \"engine\": \"",
                                          model.name, "\""));
    }
    VARLEN_ASSIGN_OR_RETURN(std::string spelled, ReadString(*version, path));
    VARLEN_ASSIGN_OR_RETURN(c.version, WithPath(EngineVersion::Parse(engine, spelled), path));
  }
  if (const json* platform = r.Optional("platform"); platform != nullptr && !platform->is_null()) {
    VARLEN_ASSIGN_OR_RETURN(std::string spelled, ReadString(*platform, r.Path("platform")));
    VARLEN_ASSIGN_OR_RETURN(c.platform, WithPath(ParsePlatform(spelled), r.Path("platform")));
  }
  VARLEN_RETURN_IF_ERROR(ReadEnum(r, "mode", true, &ParseMode, &c.mode));
  VARLEN_ASSIGN_OR_RETURN(const json* geometry, r.Required("geometry"));
  VARLEN_ASSIGN_OR_RETURN(c.geometry, ReadGeometry(*geometry, r.Path("geometry")));
  if (const json* data = r.Optional("data")) {
    VARLEN_ASSIGN_OR_RETURN(c.data, ReadData(*data, r.Path("data")));
  }
  VARLEN_ASSIGN_OR_RETURN(const json* call, r.Required("call"));
  VARLEN_ASSIGN_OR_RETURN(c.call, ReadCall(*call, r.Path("call"), engine));
  if (const json* expect = r.Optional("expect")) {
    VARLEN_ASSIGN_OR_RETURN(c.expect, ReadExpectation(*expect, r.Path("expect")));
  }
  return c;
}

// "$.geometry.dtype: ..." of warmup call `i` -> "$.warmup[i].geometry.dtype: ...".
absl::Status InWarmup(const absl::Status& status, size_t i) {
  if (status.ok()) return status;
  absl::string_view message = status.message();
  if (absl::ConsumePrefix(&message, "$")) {
    return absl::InvalidArgumentError(absl::StrCat("$.warmup[", i, "]", message));
  }
  return PathError(absl::StrCat("$.warmup[", i, "]"), message);
}

// The warmup calls of `c`, from the "warmup" field of its file (`c` itself
// is already read and valid).
absl::StatusOr<std::vector<Case::Warmup>> ReadWarmups(const json& j, const Case& c) {
  const std::string path = "$.warmup";
  if (!j.is_array()) return Expected(path, "an array of JSON merge patches of this case", j);
  if (j.size() > static_cast<size_t>(kMaxWarmupCalls)) {
    return PathError(path, absl::StrCat(j.size(), " warmup calls exceed the limit of ",
                                        kMaxWarmupCalls, " per case"));
  }
  std::vector<Case::Warmup> warmups;
  for (size_t i = 0; i < j.size(); ++i) {
    absl::StatusOr<Case::Warmup> warmup = MakeWarmup(c, j[i]);
    if (!warmup.ok()) return InWarmup(warmup.status(), i);
    warmups.push_back(*std::move(warmup));
  }
  return warmups;
}

// ---------------------------------------------------------------------------
// Validation of values that parse but cannot be.

absl::Status ValidateGeometry(const Geometry& g) {
  const std::string p = "$.geometry";
  if (static_cast<int64_t>(g.seq_lens.size()) > kMaxSequences) {
    return PathError(p + ".seq_lens", absl::StrCat("more than ", kMaxSequences, " sequences"));
  }
  int64_t total = 0;
  for (size_t i = 0; i < g.seq_lens.size(); ++i) {
    const std::string path = absl::StrCat(p, ".seq_lens[", i, "]");
    if (g.seq_lens[i] < 0) {
      return PathError(path,
                       absl::StrCat(g.seq_lens[i], " is negative: sequence lengths must be >= 0"));
    }
    VARLEN_RETURN_IF_ERROR(
        CheckRange(path, g.seq_lens[i], 0, kMaxTotalTokens, "a sequence length must fit in int32"));
    total += g.seq_lens[i];
    if (total > kMaxTotalTokens) {
      return PathError(p + ".seq_lens",
                       absl::StrCat("the sequences hold more than ", kMaxTotalTokens,
                                    " tokens, the limit of int32 token offsets"));
    }
  }
  if (!g.padding.empty() && g.padding.size() != g.seq_lens.size() + 1) {
    return PathError(p + ".padding",
                     absl::StrCat(g.padding.size(), " counts for ", g.seq_lens.size(),
                                  " sequences: one per gap, before the first and after each"));
  }
  for (size_t i = 0; i < g.padding.size(); ++i) {
    VARLEN_RETURN_IF_ERROR(CheckRange(absl::StrCat(p, ".padding[", i, "]"), g.padding[i], 0,
                                      kMaxTotalTokens, "rows in no sequence"));
    total += g.padding[i];
    if (total > kMaxTotalTokens) {
      return PathError(p + ".padding",
                       absl::StrCat("the sequences and the padding hold more than ",
                                    kMaxTotalTokens, " rows, the limit of int32 token offsets"));
    }
  }
  VARLEN_RETURN_IF_ERROR(CheckRange(p + ".num_heads", g.num_heads, 1, kMaxHeads, "heads per rank"));
  VARLEN_RETURN_IF_ERROR(CheckRange(p + ".num_kv_heads", g.num_kv_heads, 1, g.num_heads,
                                    "key/value heads cannot outnumber query heads"));
  if (g.num_heads % g.num_kv_heads != 0) {
    return PathError(p + ".num_kv_heads",
                     absl::StrCat(g.num_kv_heads, " does not divide num_heads=", g.num_heads,
                                  ": grouped-query attention needs whole groups"));
  }
  VARLEN_RETURN_IF_ERROR(CheckRange(p + ".head_dim", g.head_dim, 1, kMaxHeadDim, "head dimension"));
  VARLEN_RETURN_IF_ERROR(
      CheckRange(p + ".head_dim_v", g.head_dim_v, 1, kMaxHeadDim, "value head dimension"));
  if (!IsFloatingPoint(g.dtype)) {
    return PathError(
        p + ".dtype",
        absl::StrCat(DTypeName(g.dtype), " is not a floating dtype: q, k and v hold activations"));
  }
  if (g.softmax_scale.has_value() && !std::isfinite(*g.softmax_scale)) {
    return PathError(p + ".softmax_scale", "the intended scale must be finite");
  }
  for (const auto& [side, bound] :
       {std::pair{"[0]", g.variant.window_left}, std::pair{"[1]", g.variant.window_right}}) {
    VARLEN_RETURN_IF_ERROR(CheckRange(absl::StrCat(p, ".window", side), bound, -1, kMaxTotalTokens,
                                      "-1 (no bound) or a count of tokens"));
  }
  const std::vector<float>& sinks = g.variant.sinks;
  if (!sinks.empty() && static_cast<int64_t>(sinks.size()) != g.num_heads) {
    return PathError(p + ".sinks", absl::StrCat(sinks.size(), " sinks for num_heads=", g.num_heads,
                                                ": one logit per query head"));
  }
  for (size_t h = 0; h < sinks.size(); ++h) {
    if (std::isnan(sinks[h]) || sinks[h] == std::numeric_limits<float>::infinity()) {
      return PathError(absl::StrCat(p, ".sinks[", h, "]"),
                       "a sink is a float32 logit, or \"-inf\" for none");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCall(const CallSpec& c, const Geometry& g) {
  const std::string p = "$.call";
  const int64_t tokens = g.total_tokens();
  const int64_t bsz = c.bsz.value_or(1);
  VARLEN_RETURN_IF_ERROR(CheckRange(p + ".bsz", bsz, 1, kMaxSequences, "batch items"));
  if (c.seq_len.has_value()) {
    VARLEN_RETURN_IF_ERROR(
        CheckRange(p + ".seq_len", *c.seq_len, 0, kMaxTotalTokens, "tokens per item"));
  }
  if (c.windows.has_value() && c.entry != Entry::kTower) {
    return PathError(p + ".windows", "windows are a vision tower's: use entry \"tower\"");
  }
  VARLEN_RETURN_IF_ERROR(CallsOf(EngineOf(c.profile)).validate(c, g));
  if ((c.layout == QLayout::kBatched || c.layout == QLayout::kBatchedFusedQkv) &&
      (!c.seq_len.has_value() || bsz * *c.seq_len != tokens)) {
    return PathError(
        p + ".layout",
        absl::StrCat(
            "bsz=", bsz, " x seq_len=", c.seq_len.has_value() ? absl::StrCat(*c.seq_len) : "unset",
            ": the batched layout needs bsz * seq_len == ", tokens, " (", RowsOfGeometry(g), ")"));
  }
  if ((c.layout == QLayout::kFusedQkv || c.layout == QLayout::kBatchedFusedQkv) &&
      g.head_dim_v != g.head_dim) {
    return PathError(
        p + ".layout",
        absl::StrCat("fused_qkv needs geometry.head_dim_v == head_dim (", g.head_dim_v,
                     " != ", g.head_dim, "): one projection makes q, k and v with one head size"));
  }
  VARLEN_RETURN_IF_ERROR(ValidateArg(c.cu_seqlens, p + ".cu_seqlens"));
  std::set<std::string> keys;
  for (const auto& [key, value] : c.kwargs) {
    if (!keys.insert(key).second) {
      return PathError(absl::StrCat(p, ".kwargs.", key), "the keyword is given twice");
    }
    VARLEN_RETURN_IF_ERROR(ValidateArg(value, absl::StrCat(p, ".kwargs.", key)));
  }
  if (c.forward_metadata.has_value()) {
    const MetadataSpec& m = *c.forward_metadata;
    const std::string mp = p + ".forward_metadata";
    for (const auto& [name, value] :
         {std::pair<const char*, const ArgLiteral*>{"cu_seqlens", &m.cu_seqlens},
          {"seq_lens", &m.seq_lens},
          {"max_seqlen", &m.max_seqlen},
          {"packed_indptrs", &m.packed_indptrs},
          {"sequence_lengths", &m.sequence_lengths},
          {"flashinfer_max_seqlen", &m.flashinfer_max_seqlen}}) {
      VARLEN_RETURN_IF_ERROR(ValidateArg(*value, absl::StrCat(mp, ".", name)));
    }
    if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
      VARLEN_RETURN_IF_ERROR(CheckRange(mp + ".elem_per_token", m.elem_per_token,
                                        -kMaxTotalTokens - 1, kMaxTotalTokens,
                                        "an int32 multiplier"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Writing.

json TensorLiteralToJson(const TensorLiteral& t) {
  json values = json::array();
  if (IsFloatingPoint(t.dtype)) {
    for (double v : t.floats) {
      if (std::isnan(v)) {
        values.push_back("nan");
      } else if (std::isinf(v)) {
        values.push_back(v > 0 ? "inf" : "-inf");
      } else {
        values.push_back(v);
      }
    }
  } else if (t.dtype == DType::kBool) {
    for (int64_t v : t.ints) values.push_back(v != 0);
  } else {
    for (int64_t v : t.ints) values.push_back(v);
  }
  json j = {{"tensor", values}, {"dtype", DTypeName(t.dtype)}, {"device", DeviceName(t.device)}};
  if (t.shape.has_value()) j["shape"] = *t.shape;
  if (t.step != 1) j["step"] = t.step;
  return j;
}

json MetadataToJson(const MetadataSpec& m) {
  json j = {{"builder", MetadataBuilderName(m.builder)},
            {"device", DeviceName(m.device)},
            {"cu_seqlens", ArgLiteralToJson(m.cu_seqlens)}};
  if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
    j["elem_per_token"] = m.elem_per_token;
    return j;
  }
  auto put = [&j](const char* key, const ArgLiteral& value) {
    if (value.kind != ArgLiteral::Kind::kNone) j[key] = ArgLiteralToJson(value);
  };
  if (m.builder == MetadataSpec::Builder::kManual) put("seq_lens", m.seq_lens);
  put("max_seqlen", m.max_seqlen);
  put("packed_indptrs", m.packed_indptrs);
  put("sequence_lengths", m.sequence_lengths);
  put("flashinfer_max_seqlen", m.flashinfer_max_seqlen);
  return j;
}

bool IsScalar(const json& j) { return !j.is_object() && !j.is_array(); }

void Format(const json& j, int indent, std::string* out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  const std::string inner(static_cast<size_t>(indent + 2), ' ');
  if (j.is_object() && !j.empty()) {
    out->append("{\n");
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out->append(",\n");
      first = false;
      absl::StrAppend(out, inner, json(it.key()).dump(), ": ");
      Format(it.value(), indent + 2, out);
    }
    absl::StrAppend(out, "\n", pad, "}");
  } else if (j.is_array() && !j.empty() && !std::all_of(j.begin(), j.end(), IsScalar)) {
    out->append("[\n");
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out->append(",\n");
      out->append(inner);
      Format(j[i], indent + 2, out);
    }
    absl::StrAppend(out, "\n", pad, "]");
  } else {
    out->append(j.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

}  // namespace

json ArgLiteralToJson(const ArgLiteral& a) {
  switch (a.kind) {
    case ArgLiteral::Kind::kNone:
      return nullptr;
    case ArgLiteral::Kind::kBool:
      return a.b;
    case ArgLiteral::Kind::kInt:
      return a.i;
    case ArgLiteral::Kind::kFloat:
      if (std::isnan(a.f)) return {{"float", "nan"}};
      if (std::isinf(a.f)) return {{"float", a.f > 0 ? "inf" : "-inf"}};
      return a.f;
    case ArgLiteral::Kind::kStr:
      return a.s;
    case ArgLiteral::Kind::kTensor:
      return TensorLiteralToJson(a.tensor);
    case ArgLiteral::Kind::kList: {
      json list = json::array();
      for (const ArgLiteral& item : a.list) list.push_back(ArgLiteralToJson(item));
      return list;
    }
    case ArgLiteral::Kind::kSingletonCache:
      return {
          {"singleton_cache", a.cache_has_data ? TensorLiteralToJson(a.tensor) : json(nullptr)}};
    case ArgLiteral::Kind::kEmptyLikeQ:
      return {{"empty_like", "q"}};
  }
  return nullptr;
}

TensorLiteral LiteralOfTensor(const Tensor& t) {
  TensorLiteral literal;
  literal.dtype = t.dtype();
  literal.device = t.device();
  if (t.dim() != 1) literal.shape = t.shape();
  // A view that takes every step-th row of a dense base says so.
  if (t.dim() >= 1 && !t.is_contiguous()) {
    Shape strides = ContiguousStrides(t.shape());
    const int64_t row = strides[0];
    if (row > 0 && t.strides()[0] % row == 0) {
      strides[0] = t.strides()[0];
      if (strides == t.strides()) literal.step = t.strides()[0] / row;
    }
  }
  if (t.has_storage()) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (IsFloatingPoint(t.dtype())) {
        literal.floats.push_back(t.DoubleAtLogical(i));
      } else {
        literal.ints.push_back(t.IntAtLogical(i));
      }
    }
  }
  return literal;
}

json TensorToJson(const Tensor& t) { return TensorLiteralToJson(LiteralOfTensor(t)); }

json CaseToJson(const Case& c) {
  json geometry = {
      {"seq_lens", c.geometry.seq_lens},         {"num_heads", c.geometry.num_heads},
      {"num_kv_heads", c.geometry.num_kv_heads}, {"head_dim", c.geometry.head_dim},
      {"head_dim_v", c.geometry.head_dim_v},     {"dtype", DTypeName(c.geometry.dtype)}};
  if (c.geometry.softmax_scale.has_value()) geometry["softmax_scale"] = *c.geometry.softmax_scale;
  const AttentionVariant& variant = c.geometry.variant;
  if (variant.causal()) {
    geometry["causal"] = true;
  } else if (variant.windowed()) {
    geometry["window"] = {variant.window_left, variant.window_right};
  }
  if (!variant.sinks.empty()) {
    json sinks = json::array();
    for (const float sink : variant.sinks) {
      sinks.push_back(std::isinf(sink) ? json("-inf") : json(static_cast<double>(sink)));
    }
    geometry["sinks"] = sinks;
  }
  if (const std::vector<int64_t>& padding = c.geometry.padding; !padding.empty()) {
    const bool trailing_only =
        std::all_of(padding.begin(), padding.end() - 1, [](int64_t n) { return n == 0; });
    geometry["padding"] = trailing_only ? json(padding.back()) : json(padding);
  }

  json call = {{"profile", ProfileName(c.call.profile)},
               {"entry", EntryName(c.call.entry)},
               {"graph_mode", c.call.graph_mode},
               {"layout", QLayoutName(c.call.layout)},
               {"cu_seqlens", ArgLiteralToJson(c.call.cu_seqlens)},
               {"forward_metadata", c.call.forward_metadata.has_value()
                                        ? MetadataToJson(*c.call.forward_metadata)
                                        : json(nullptr)}};
  if (c.call.vllm_metadata.has_value()) {
    const VllmMetadataSpec& m = *c.call.vllm_metadata;
    json vm = {{"cu_seqlens", ArgLiteralToJson(m.cu_seqlens)},
               {"tp_size", m.tp_size},
               {"device", DeviceName(m.device)}};
    if (m.hidden_size.has_value()) vm["hidden_size"] = *m.hidden_size;
    if (m.fp8_padded_hidden_size.has_value())
      vm["fp8_padded_hidden_size"] = *m.fp8_padded_hidden_size;
    call["vllm_metadata"] = vm;
  }
  if (c.call.merged_heads) call["merged_heads"] = true;
  if (c.call.rotary) call["rotary"] = true;
  if (c.call.windows.has_value()) {
    call["windows"] = {{"window_size", c.call.windows->window_size},
                       {"patch_size", c.call.windows->patch_size},
                       {"spatial_merge_size", c.call.windows->spatial_merge_size}};
  }
  if (c.call.qkv_device.has_value()) call["qkv_device"] = DeviceName(*c.call.qkv_device);
  if (c.call.bsz.has_value()) call["bsz"] = *c.call.bsz;
  if (c.call.seq_len.has_value()) call["seq_len"] = *c.call.seq_len;
  json kwargs = json::object();
  for (const auto& [key, value] : c.call.kwargs) kwargs[key] = ArgLiteralToJson(value);
  call["kwargs"] = kwargs;
  if (c.call.profile == Profile::kSdpa || c.call.sdpa != SdpaOptions{}) {
    call["sdpa"] = {{"flatten_batch", c.call.sdpa.flatten_batch},
                    {"softmax_in_single_precision", c.call.sdpa.softmax_in_single_precision}};
    if (c.call.sdpa.softmax_scale.has_value()) {
      call["sdpa"]["softmax_scale"] = *c.call.sdpa.softmax_scale;
    }
  }

  json j = {{"name", c.name}, {"source", c.source}, {"description", c.description}};
  if (c.engine() != Engine::kSglang) j["engine"] = EngineName(c.engine());
  if (c.version.has_value()) j[std::string(EngineName(c.version->engine()))] = c.version->name();
  if (c.platform.has_value()) j["platform"] = PlatformName(*c.platform);
  j["mode"] = ModeName(c.mode);
  j["geometry"] = geometry;
  if (c.data.files.has_value()) {
    j["data"] = {
        {"files", {{"q", c.data.files->q}, {"k", c.data.files->k}, {"v", c.data.files->v}}}};
  } else {
    j["data"] = {{"seed", c.data.seed}, {"distribution", DistributionName(c.data.distribution)}};
  }
  j["call"] = call;
  if (!c.warmup.empty()) {
    json warmup = json::array();
    for (const Case::Warmup& w : c.warmup) warmup.push_back(w.patch);
    j["warmup"] = warmup;
  }
  if (c.expect.has_value()) {
    const Expectation& e = *c.expect;
    json expect = {{"outcome", ExpectedOutcomeName(e.outcome)}};
    if (e.outcome == Expectation::Outcome::kError) {
      expect["error"] = PyErrorKindName(e.error_kind);
      expect["message"] = e.message;
    }
    if (e.host_syncs.has_value()) expect["host_syncs"] = *e.host_syncs;
    if (!e.resolved.is_null()) expect["resolved"] = e.resolved;
    if (e.unread_keywords.has_value()) expect["unread_keywords"] = *e.unread_keywords;
    j["expect"] = expect;
  }
  return j;
}

std::string FormatJson(const json& value) {
  std::string out;
  Format(value, 0, &out);
  return out;
}

std::string WriteCase(const Case& c) { return FormatJson(CaseToJson(c)) + "\n"; }

absl::Status ValidateCase(const Case& c) {
  if (c.name.empty() || !std::all_of(c.name.begin(), c.name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
      })) {
    return PathError("$.name", absl::StrCat("\"", c.name,
                                            "\" must be non-empty and use only letters, digits, "
                                            "'-', '_' and '.'"));
  }
  if (c.source.empty()) {
    return PathError("$.source", "every case names where it comes from (an issue, a PR, a rule)");
  }
  VARLEN_RETURN_IF_ERROR(ValidateGeometry(c.geometry));
  VARLEN_RETURN_IF_ERROR(ValidateCall(c.call, c.geometry));
  if (c.expect.has_value() && c.expect->outcome == Expectation::Outcome::kSilentCorruption &&
      !FitsForwardBudget(c.geometry)) {
    return PathError("$.expect.outcome",
                     "silent_corruption can only be observed by a forward run, and this geometry "
                     "exceeds the CPU budget (run resolution only)");
  }
  if (c.warmup.size() > static_cast<size_t>(kMaxWarmupCalls)) {
    return PathError("$.warmup", absl::StrCat(c.warmup.size(), " warmup calls exceed the limit of ",
                                              kMaxWarmupCalls, " per case"));
  }
  for (size_t i = 0; i < c.warmup.size(); ++i) {
    const Case& patched = c.warmup[i].patched;
    if (!patched.warmup.empty()) {
      return PathError(absl::StrCat("$.warmup[", i, "].warmup"),
                       "a warmup call cannot have warmup calls of its own");
    }
    if (patched.expect.has_value()) {
      return PathError(absl::StrCat("$.warmup[", i, "].expect"),
                       "a warmup call's outcome is not judged: expect belongs to the case itself");
    }
    VARLEN_RETURN_IF_ERROR(InWarmup(ValidateCase(patched), i));
  }
  return absl::OkStatus();
}

absl::StatusOr<Case::Warmup> MakeWarmup(const Case& c, const nlohmann::ordered_json& patch) {
  if (!patch.is_object()) {
    return Expected("$", "an object (a JSON merge patch of this case)", patch);
  }
  // Checked on the patch: the base has neither field, so only a patch can
  // bring them.
  if (patch.contains("warmup")) {
    return PathError("$.warmup", "a warmup call cannot have warmup calls of its own");
  }
  if (patch.contains("expect")) {
    return PathError("$.expect",
                     "a warmup call's outcome is not judged: expect belongs to the case itself");
  }
  json patched = CaseToJson(c);
  patched.erase("warmup");
  patched.erase("expect");
  // A file's values are the case's own call's: a warmup draws its own.
  if (c.data.files.has_value()) patched.erase("data");
  patched.merge_patch(patch);
  VARLEN_ASSIGN_OR_RETURN(Case made, ReadCase(patched));
  VARLEN_RETURN_IF_ERROR(ValidateCase(made));
  return Case::Warmup{patch, std::move(made)};
}

// Thrown by the parse callback to stop at absurd nesting, before any
// recursive copy or destruction of the parsed value can exhaust the stack.
struct TooDeep {};

absl::StatusOr<Case> ParseCase(absl::string_view json_text, absl::string_view origin) {
  // A repeated key would silently keep its last value: refuse it instead.
  std::vector<std::set<std::string>> keys_by_object;
  std::string duplicate;
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    if (event == json::parse_event_t::object_start) keys_by_object.emplace_back();
    if (event == json::parse_event_t::object_end) keys_by_object.pop_back();
    if (event == json::parse_event_t::key &&
        !keys_by_object.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end(), check);
  } catch (const json::exception& e) {  // syntax errors, and numbers beyond double's range
    return absl::InvalidArgumentError(absl::StrCat(origin, ": invalid JSON: ", e.what()));
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": invalid JSON: values nest deeper than ", kMaxJsonDepth, " levels"));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": invalid JSON: the key \"", duplicate,
                                                   "\" appears twice in one object"));
  }
  absl::StatusOr<Case> c = ReadCase(j);
  if (c.ok()) {
    absl::Status valid = ValidateCase(*c);
    if (!valid.ok()) c = valid;
  }
  // Warmup calls are patches of the valid case, so they are read after it.
  if (c.ok() && j.contains("warmup")) {
    absl::StatusOr<std::vector<Case::Warmup>> warmups = ReadWarmups(j.at("warmup"), *c);
    if (warmups.ok()) {
      c->warmup = *std::move(warmups);
    } else {
      c = warmups.status();
    }
  }
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", c.status().message()));
  return c;
}

absl::StatusOr<Case> LoadCaseFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > static_cast<size_t>(kMaxCaseFileBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", text.str().size(), " bytes exceed the case file limit of ", kMaxCaseFileBytes));
  }
  VARLEN_ASSIGN_OR_RETURN(Case c, ParseCase(text.str(), path));
  VARLEN_RETURN_IF_ERROR(
      LoadCaseData(&c, std::filesystem::path(path).parent_path().string(), path));
  return c;
}

absl::StatusOr<std::vector<std::string>> ListCaseFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        if (it->is_regular_file(ec) && it->path().extension() == ".json") {
          found.push_back(it->path().string());
        }
      }
      if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(path, ec)) {
      files.push_back(path);
    } else {
      return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
    }
  }
  return files;
}

}  // namespace varlen
