#include "integration/formats/safetensors/internal/header_sax.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace shardkit::safetensors::internal {
namespace {

using Json = nlohmann::json;

// What the strict DOM sees in `text`, as the fast path's fields (entries sorted by name).
RawHeader FromDom(const std::string& text) {
  const Json dom = Json::parse(text);
  RawHeader out;
  for (const auto& [name, value] : dom.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : value.items()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    std::vector<int64_t> shape;
    for (const Json& d : value["shape"]) shape.push_back(d.get<int64_t>());
    out.tensors.push_back(RawEntry{name, value["dtype"].get<std::string>(), shape,
                                   value["data_offsets"][0].get<uint64_t>(),
                                   value["data_offsets"][1].get<uint64_t>()});
  }
  return out;
}

void ExpectSameAsDom(const std::string& text) {
  std::optional<RawHeader> fast = ParseWellFormedHeader(text);
  ASSERT_TRUE(fast.has_value()) << text;
  RawHeader dom = FromDom(text);
  std::sort(fast->tensors.begin(), fast->tensors.end(),
            [](const RawEntry& a, const RawEntry& b) { return a.name < b.name; });
  ASSERT_EQ(fast->tensors.size(), dom.tensors.size()) << text;
  for (size_t i = 0; i < dom.tensors.size(); ++i) {
    const RawEntry& a = fast->tensors[i];
    const RawEntry& b = dom.tensors[i];
    EXPECT_EQ(a.name, b.name) << text;
    EXPECT_EQ(a.dtype, b.dtype) << text;
    EXPECT_EQ(a.shape, b.shape) << text;
    EXPECT_EQ(a.begin, b.begin) << text;
    EXPECT_EQ(a.end, b.end) << text;
  }
  EXPECT_EQ(fast->metadata, dom.metadata) << text;
}

TEST(HeaderSaxTest, ReadsWellFormedHeadersAsTheDomDoes) {
  ExpectSameAsDom("{}");
  ExpectSameAsDom(R"({"__metadata__":{}})");
  ExpectSameAsDom(R"({"b":{"dtype":"F32","shape":[2,3],"data_offsets":[24,48]},
      "a":{"data_offsets":[0,24],"shape":[6],"dtype":"F32"}})");
  ExpectSameAsDom(R"( { "__metadata__" : {"format":"pt","k\u00e9y":"v\"\\"},
      "s":{"dtype":"BF16","shape":[],"data_offsets":[0,2]},
      "z":{"dtype":"U8","shape":[0,7],"data_offsets":[2,2]},
      "\ud83d\ude00 \t":{"dtype":"I64","shape":[9223372036854775807],"data_offsets":[2,2]} } )");
  ExpectSameAsDom(
      R"({"":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,18446744073709551615]}})");
}

TEST(HeaderSaxTest, GivesUpOnEverythingElse) {
  const std::vector<std::string> refused = {
      "",
      "[]",
      "null",
      "{",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x)",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"( "a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",                // dup name
      R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",  // dup field
      R"({"__metadata__":{},"__metadata__":{}})",                                 // dup
      R"({"__metadata__":{"k":"a","k":"b"}})",                                    // dup
      R"({"__metadata__":{"k":1}})",
      R"({"__metadata__":"x"})",
      R"({"a":{"dtype":"F32","shape":[1]}})",                             // missing
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})",  // unknown
      R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})",
      R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":"x"}})",
      R"({"a":[]})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":null})",
      std::string("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\0", 55),
      "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",  // invalid UTF-8
  };
  for (const std::string& text : refused) {
    EXPECT_FALSE(ParseWellFormedHeader(text).has_value()) << text;
  }
  std::string deep = R"({"a":{"dtype":"F32","shape":[)";
  for (int i = 0; i < 65; ++i) deep += "1,";
  deep += R"(1],"data_offsets":[0,4]}})";
  EXPECT_FALSE(ParseWellFormedHeader(deep).has_value()) << "66 dims";
}

}  // namespace
}  // namespace shardkit::safetensors::internal
