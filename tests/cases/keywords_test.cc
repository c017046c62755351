// The keyword table (varlen keywords): what faithful mode does with each
// keyword beside a correct call, and the copy of it in the guide
// (docs/bug-report-to-case.md), which must be the table itself.

#include "varlen/cases/keywords.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

using ::testing::Contains;

const KeywordUse* Find(const std::vector<KeywordUse>& uses, Profile profile, Entry entry,
                       absl::string_view version) {
  for (const KeywordUse& use : uses) {
    if (use.profile != profile || use.entry != entry) continue;
    for (const EngineVersion& v : use.versions) {
      if (v.name() == version) return &use;
    }
  }
  return nullptr;
}

TEST(KeywordTableTest, SaysWhatEachProfileReads) {
  const std::vector<KeywordUse> uses = KeywordUses();
  // SGLang's fa3 reads max_seqlen; aiter derives its own and ignores it.
  const KeywordUse* fa3 = Find(uses, Profile::kFa3, Entry::kDirect, "0.5.23");
  ASSERT_NE(fa3, nullptr);
  EXPECT_THAT(fa3->read, Contains("max_seqlen"));
  EXPECT_THAT(fa3->ignored, Contains("max_seq_len"));  // a typo is never read
  const KeywordUse* aiter = Find(uses, Profile::kAiterAttn, Entry::kDirect, "0.5.23");
  ASSERT_NE(aiter, nullptr);
  EXPECT_THAT(aiter->ignored, Contains("max_seqlen"));
  // vLLM's forward takes three keywords and refuses the others.
  const KeywordUse* sdpa = Find(uses, Profile::kVllmTorchSdpa, Entry::kDirect, "0.33.0");
  ASSERT_NE(sdpa, nullptr);
  EXPECT_THAT(sdpa->ignored, Contains("max_seqlen"));
  EXPECT_THAT(sdpa->refused, Contains("window_size (TypeError)"));
  // transformers' layer reads a caller's max_seqlen from 5.15.0 on only.
  const KeywordUse* old_layer = Find(uses, Profile::kTfFlashAttention2, Entry::kLayer, "5.14.1");
  const KeywordUse* new_layer = Find(uses, Profile::kTfFlashAttention2, Entry::kLayer, "5.25.0");
  ASSERT_NE(old_layer, nullptr);
  ASSERT_NE(new_layer, nullptr);
  EXPECT_THAT(old_layer->ignored, Contains("max_seqlen"));
  EXPECT_THAT(new_layer->read, Contains("max_seqlen"));
}

TEST(KeywordTableTest, TheGuideHoldsTheTableAsItIs) {
  std::ifstream file(VARLEN_TEST_GUIDE);
  ASSERT_TRUE(file) << VARLEN_TEST_GUIDE;
  std::stringstream text;
  text << file.rdbuf();
  const std::string guide = text.str();
  const std::string begin = "<!-- varlen keywords: begin -->\n";
  const std::string end = "<!-- varlen keywords: end -->";
  const size_t from = guide.find(begin);
  const size_t to = guide.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(guide.substr(from + begin.size(), to - from - begin.size()),
            absl::StrCat("\n", KeywordTableMarkdown(), "\n"))
      << "the guide's table is not `varlen keywords`' output: paste it again";
}

}  // namespace
}  // namespace varlen
