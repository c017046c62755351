#include "varlen/cases/keywords.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"
#include "varlen/contract/resolve.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

// Two sequences every kernel takes (bfloat16, an even head size that is a
// multiple of 8, as many key heads as query heads).
Case ProbeCase(Profile profile, EngineVersion version, Entry entry) {
  Case c;
  c.name = "keywords";
  c.source = "keywords";
  c.mode = Mode::kFaithful;
  c.version = version;
  c.geometry.seq_lens = {24, 40};
  c.geometry.num_heads = 4;
  c.geometry.num_kv_heads = 4;
  c.geometry.head_dim = 64;
  c.geometry.head_dim_v = 64;
  c.geometry.dtype = DType::kBFloat16;
  c.call.profile = profile;
  SetCorrectCall(&c, profile, /*prepared=*/false, entry);
  return c;
}

Resolution ResolveCase(const Case& c) {
  absl::StatusOr<AttentionCall> call = CallOfCase(c, ShapeOnlyQkv(c));
  if (!call.ok()) {
    Resolution r;
    r.status = call.status();
    return r;
  }
  return Resolve(*call, c.call.profile, c.mode);
}

bool Passes(const CallSpec& call, const std::string& key) {
  return std::any_of(call.kwargs.begin(), call.kwargs.end(),
                     [&](const auto& kv) { return kv.first == key; });
}

std::string RefusalName(const absl::Status& status) {
  if (std::optional<PyErrorKind> kind = PythonErrorKindOf(status)) {
    return std::string(PyErrorKindName(*kind));
  }
  return status.code() == absl::StatusCode::kUnimplemented ? "not modelled"
                                                           : std::string(status.ToString());
}

// What `c`'s call does with each probed keyword.
KeywordUse UseOf(const Case& c) {
  KeywordUse use;
  use.profile = c.call.profile;
  use.entry = c.call.entry;
  const Resolution base = ResolveCase(c);
  for (const std::string& key : ProbedKeywords()) {
    Resolution probed;
    const Resolution* r = &base;
    if (!Passes(c.call, key)) {
      Case with = c;
      SetKwarg(&with.call, key, ArgLiteral::None());
      probed = ResolveCase(with);
      r = &probed;
    }
    if (!r->status.ok()) {
      use.refused.push_back(absl::StrCat(key, " (", RefusalName(r->status), ")"));
    } else if (std::find(r->unread_keywords.begin(), r->unread_keywords.end(), key) !=
               r->unread_keywords.end()) {
      use.ignored.push_back(key);
    } else {
      use.read.push_back(key);
    }
  }
  return use;
}

bool SameUse(const KeywordUse& a, const KeywordUse& b) {
  return a.profile == b.profile && a.entry == b.entry && a.read == b.read &&
         a.ignored == b.ignored && a.refused == b.refused;
}

std::string VersionsText(const KeywordUse& use) {
  const Engine engine = EngineOf(use.profile);
  if (use.versions.size() == EngineVersion::Modelled(engine).size()) return "all";
  std::vector<std::string> names;
  for (const EngineVersion& v : use.versions) names.emplace_back(v.name());
  return absl::StrJoin(names, ", ");
}

std::string ListText(const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  return absl::StrCat("`", absl::StrJoin(keys, "`, `"), "`");
}

}  // namespace

const std::vector<std::string>& ProbedKeywords() {
  static const auto* const keys = new std::vector<std::string>{
      "max_seqlen",    "sequence_lengths", "softmax_scale", "output_ws",    "window_size",
      "s_aux",         "attention_mask",   "scaling",       "dropout",      "is_causal",
      "cu_seq_lens_q", "cu_seq_lens_k",    "max_length_q",  "max_length_k", "position_ids",
      "max_seq_len"};
  return *keys;
}

std::vector<KeywordUse> KeywordUses() {
  std::vector<KeywordUse> uses;
  for (const Engine engine : AllEngines()) {
    for (const Profile profile : ProfilesOf(engine)) {
      for (const Entry asked : {Entry::kDirect, Entry::kLayer}) {
        for (const EngineVersion& version : EngineVersion::Modelled(engine)) {
          const Case c = ProbeCase(profile, version, asked);
          // No correct call through this entry (vLLM's one entry;
          // transformers' SDPA over several sequences, only the layer).
          if (c.call.entry != asked) continue;
          KeywordUse use = UseOf(c);
          use.versions = {version};
          // Versions that do the same share a row.
          auto same = std::find_if(uses.begin(), uses.end(),
                                   [&](const KeywordUse& u) { return SameUse(u, use); });
          if (same != uses.end()) {
            same->versions.push_back(version);
          } else {
            uses.push_back(std::move(use));
          }
        }
      }
    }
  }
  return uses;
}

std::string KeywordTableMarkdown() {
  std::string out;
  Engine current = Engine::kSglang;
  bool first = true;
  for (const KeywordUse& use : KeywordUses()) {
    const Engine engine = EngineOf(use.profile);
    if (first || engine != current) {
      absl::StrAppend(&out, first ? "" : "\n", ModelOf(engine).title, ":\n\n",
                      "| profile | entry | versions | reads | ignores | refuses |\n",
                      "|---|---|---|---|---|---|\n");
      current = engine;
      first = false;
    }
    absl::StrAppend(&out, "| `", ProfileName(use.profile), "` | ", EntryName(use.entry), " | ",
                    VersionsText(use), " | ", ListText(use.read), " | ", ListText(use.ignored),
                    " | ", absl::StrJoin(use.refused, ", "), " |\n");
  }
  return out;
}

}  // namespace varlen
