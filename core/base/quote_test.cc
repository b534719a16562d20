#include "core/base/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace shardkit {
namespace {

TEST(QuoteName, KeepsLongRealNamesWhole) {
  const std::string name = "model.language_model.layers.12.self_attn.q_proj.weight";
  EXPECT_EQ(QuoteName(name), "\"" + name + "\"");
}

TEST(QuoteName, EscapesAsJson) {
  EXPECT_EQ(QuoteName("a\"b\\c\nd\te\x01"), R"("a\"b\\c\nd\te\u0001")");
  EXPECT_EQ(QuoteName(""), "\"\"");
}

TEST(QuoteName, KeepsUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(QuoteName("caf\xC3\xA9"), "\"caf\xC3\xA9\"");
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate.
  EXPECT_EQ(QuoteName("a\x80\x62\xC3"), R"("a\ufffdb\ufffd")");  // \x62: b
  EXPECT_EQ(QuoteName("\xC0\xAF"), R"("\ufffd\ufffd")");
  EXPECT_EQ(QuoteName("\xED\xA0\x80"), R"("\ufffd\ufffd\ufffd")");
}

TEST(IsValidUtf8, AsQuoteNameJudgesIt) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("model.\xC3\xA9\xE2\x80\xA6\xF0\x9F\x98\x80"));  // é … 😀
  for (const char* bad : {"a\x80", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << QuoteName(bad);
  }
}

TEST(QuoteName, CutsBeyondOneKibibyteWithItsLength) {
  const std::string exact(kMaxQuotedNameBytes, 'x');
  EXPECT_EQ(QuoteName(exact), "\"" + exact + "\"");
  const std::string longer(5000, 'y');
  EXPECT_EQ(QuoteName(longer),
            "\"" + std::string(kMaxQuotedNameBytes, 'y') + "\"\xE2\x80\xA6 (5000 bytes)");
  // The cut falls on a character boundary: a 2-byte character straddling the limit is left out.
  const std::string straddling = std::string(kMaxQuotedNameBytes - 1, 'z') + "\xC3\xA9";
  EXPECT_EQ(QuoteName(straddling),
            "\"" + std::string(kMaxQuotedNameBytes - 1, 'z') + "\"\xE2\x80\xA6 (1025 bytes)");
}

TEST(JoinFirst, NamesAFewAndCountsTheRest) {
  EXPECT_EQ(JoinFirst({}, 3), "");
  EXPECT_EQ(JoinFirst({"a"}, 3), "a");
  EXPECT_EQ(JoinFirst({"a", "b", "c"}, 3), "a, b, c");
  EXPECT_EQ(JoinFirst({"a", "b", "c", "d", "e"}, 3), "a, b, c and 2 more");
  EXPECT_EQ(JoinFirst({"a", "b"}, 1), "a and 1 more");
}

}  // namespace
}  // namespace shardkit
