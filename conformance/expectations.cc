#include "varlen/conformance/expectations.h"

#include <fnmatch.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace varlen {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(absl::string_view origin, absl::string_view path, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": ", path, ": ", rule));
}

absl::StatusOr<std::string> StringField(const Json& object, const char* key, bool required,
                                        absl::string_view origin, const std::string& path) {
  if (!object.contains(key)) {
    if (required) return Invalid(origin, absl::StrCat(path, ".", key), "is required");
    return std::string();
  }
  const Json& value = object[key];
  if (!value.is_string()) {
    return Invalid(origin, absl::StrCat(path, ".", key),
                   absl::StrCat("expected a string, got ", value.dump()));
  }
  return value.get<std::string>();
}

absl::StatusOr<ExpectationEntry> ParseEntry(const Json& j, absl::string_view origin,
                                            const std::string& path) {
  if (!j.is_object())
    return Invalid(origin, path, absl::StrCat("expected an object, got ", j.dump()));
  for (const auto& [key, value] : j.items()) {
    if (key != "test" && key != "dtype" && key != "distribution" && key != "expect" &&
        key != "reason" && key != "issue" && key != "expires") {
      return Invalid(origin, absl::StrCat(path, ".", key),
                     "unknown key (known: test, dtype, distribution, expect, reason, issue, "
                     "expires)");
    }
  }
  ExpectationEntry entry;
  absl::StatusOr<std::string> text = StringField(j, "test", true, origin, path);
  if (!text.ok()) return text.status();
  entry.test = *text;
  if (entry.test.empty()) return Invalid(origin, path + ".test", "must not be empty");

  text = StringField(j, "expect", true, origin, path);
  if (!text.ok()) return text.status();
  if (*text == "fail") {
    entry.expect = Expect::kFail;
  } else if (*text == "skip") {
    entry.expect = Expect::kSkip;
  } else if (*text == "flaky") {
    entry.expect = Expect::kFlaky;
  } else {
    return Invalid(origin, path + ".expect",
                   absl::StrCat("\"", *text, "\" is not one of fail, skip, flaky"));
  }

  text = StringField(j, "reason", true, origin, path);
  if (!text.ok()) return text.status();
  entry.reason = *text;
  if (entry.reason.empty()) {
    return Invalid(origin, path + ".reason", "must say why (an entry without a reason is a debt)");
  }

  text = StringField(j, "issue", false, origin, path);
  if (!text.ok()) return text.status();
  entry.issue = *text;

  text = StringField(j, "dtype", false, origin, path);
  if (!text.ok()) return text.status();
  if (!text->empty()) {
    absl::StatusOr<DType> dtype = ParseDType(*text);
    if (!dtype.ok()) return Invalid(origin, path + ".dtype", dtype.status().message());
    entry.dtype = *dtype;
  }

  text = StringField(j, "distribution", false, origin, path);
  if (!text.ok()) return text.status();
  if (!text->empty()) {
    absl::StatusOr<Distribution> distribution = ParseDistribution(*text);
    if (!distribution.ok()) {
      return Invalid(origin, path + ".distribution", distribution.status().message());
    }
    entry.distribution = *distribution;
  }

  text = StringField(j, "expires", false, origin, path);
  if (!text.ok()) return text.status();
  if (!text->empty()) {
    absl::CivilDay day;
    if (!absl::ParseCivilTime(*text, &day)) {
      return Invalid(origin, path + ".expires",
                     absl::StrCat("\"", *text, "\" is not a date YYYY-MM-DD"));
    }
    entry.expires = day;
  }
  return entry;
}

}  // namespace

absl::StatusOr<Expectations> ParseExpectations(absl::string_view json_text,
                                               absl::string_view origin) {
  const Json j =
      Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid(origin, "$", "invalid JSON");
  if (!j.is_object()) return Invalid(origin, "$", "expected an object");
  for (const auto& [key, value] : j.items()) {
    if (key != "backend" && key != "strict" && key != "entries") {
      return Invalid(origin, absl::StrCat("$.", key),
                     "unknown key (known: backend, strict, entries)");
    }
  }
  Expectations out;
  out.origin = std::string(origin);
  absl::StatusOr<std::string> backend = StringField(j, "backend", false, origin, "$");
  if (!backend.ok()) return backend.status();
  out.backend = *backend;
  if (j.contains("strict")) {
    if (!j["strict"].is_boolean()) {
      return Invalid(origin, "$.strict",
                     absl::StrCat("expected true or false, got ", j["strict"].dump()));
    }
    out.strict = j["strict"].get<bool>();
  }
  if (!j.contains("entries") || !j["entries"].is_array()) {
    return Invalid(origin, "$.entries", "an array of entries is required");
  }
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    absl::StatusOr<ExpectationEntry> entry =
        ParseEntry(j["entries"][i], origin, absl::StrCat("$.entries[", i, "]"));
    if (!entry.ok()) return entry.status();
    out.entries.push_back(*std::move(entry));
  }
  return out;
}

absl::StatusOr<Expectations> LoadExpectations(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the expectations file"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseExpectations(text.str(), path);
}

absl::CivilDay Today() { return absl::ToCivilDay(absl::Now(), absl::UTCTimeZone()); }

bool Expired(const ExpectationEntry& entry, absl::CivilDay today) {
  return entry.expires.has_value() && *entry.expires < today;
}

const ExpectationEntry* FindExpectation(const Expectations& expectations, absl::string_view test,
                                        std::optional<DType> dtype, absl::CivilDay today,
                                        std::optional<Distribution> distribution) {
  const std::string name(test);
  for (const ExpectationEntry& entry : expectations.entries) {
    if (Expired(entry, today)) continue;
    if (entry.dtype.has_value() && entry.dtype != dtype) continue;
    if (entry.distribution.has_value() && entry.distribution != distribution) continue;
    if (fnmatch(entry.test.c_str(), name.c_str(), 0) == 0) return &entry;
  }
  return nullptr;
}

std::vector<std::string> ManifestProblems(const Expectations& expectations,
                                          const std::vector<std::string>& tests,
                                          absl::CivilDay today) {
  std::vector<std::string> problems;
  for (const ExpectationEntry& entry : expectations.entries) {
    if (Expired(entry, today)) {
      problems.push_back(absl::StrCat("expired: ", entry.test, " (", DescribeEntry(entry), ")"));
      continue;
    }
    bool matches = false;
    for (const std::string& test : tests) {
      if (fnmatch(entry.test.c_str(), test.c_str(), 0) == 0) {
        matches = true;
        break;
      }
    }
    if (!matches) {
      problems.push_back(
          absl::StrCat("stale: ", entry.test, " matches no test (", DescribeEntry(entry), ")"));
    }
  }
  return problems;
}

std::string DescribeEntry(const ExpectationEntry& entry) {
  std::string text =
      absl::StrCat(entry.expect == Expect::kFail   ? "fail"
                   : entry.expect == Expect::kSkip ? "skip"
                                                   : "flaky",
                   entry.dtype.has_value() ? absl::StrCat(" (", DTypeName(*entry.dtype), ")") : "",
                   entry.distribution.has_value()
                       ? absl::StrCat(" (", DistributionName(*entry.distribution), " data)")
                       : "",
                   ": ", entry.reason);
  if (!entry.issue.empty()) absl::StrAppend(&text, " (", entry.issue, ")");
  if (entry.expires.has_value())
    absl::StrAppend(&text, ", until ", absl::FormatCivilTime(*entry.expires));
  return text;
}

bool AppliesTo(const Expectations& expectations, absl::string_view backend) {
  return expectations.backend.empty() || expectations.backend == backend;
}

BackendCapabilities WithoutSkippedDTypes(BackendCapabilities caps, const Expectations& expectations,
                                         absl::string_view test, absl::CivilDay today) {
  std::erase_if(caps.input_dtypes, [&](DType dtype) {
    const ExpectationEntry* e = FindExpectation(expectations, test, dtype, today);
    return e != nullptr && e->dtype.has_value() && e->expect == Expect::kSkip;
  });
  return caps;
}

std::vector<Distribution> SkippedDistributions(const Expectations& expectations,
                                               absl::string_view test, absl::CivilDay today) {
  std::vector<Distribution> skipped;
  const std::string name(test);
  for (const ExpectationEntry& entry : expectations.entries) {
    if (Expired(entry, today) || entry.expect != Expect::kSkip || entry.dtype.has_value() ||
        !entry.distribution.has_value() || fnmatch(entry.test.c_str(), name.c_str(), 0) != 0) {
      continue;
    }
    skipped.push_back(*entry.distribution);
  }
  return skipped;
}

}  // namespace varlen
