#include "core/base/quote.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardkit {
namespace {

bool Continuation(unsigned char c, unsigned char low = 0x80, unsigned char high = 0xBF) {
  return c >= low && c <= high;
}

// The length of the valid UTF-8 character at s[i], or 0 if the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t CharLength(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  const size_t left = s.size() - i;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && Continuation(at(1)) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
    return left >= 3 && Continuation(at(1), low, high) && Continuation(at(2)) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
    return left >= 4 && Continuation(at(1), low, high) && Continuation(at(2)) && Continuation(at(3))
               ? 4
               : 0;
  }
  return 0;
}

void AppendEscaped(unsigned char c, std::string& out) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (c < 0x20) {
    absl::StrAppendFormat(&out, "\\u%04x", c);
  } else {
    out.push_back(static_cast<char>(c));
  }
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0, length = 0; i < text.size(); i += length) {
    if ((length = CharLength(text, i)) == 0) return false;
  }
  return true;
}

std::string QuoteName(std::string_view name) {
  std::string out = "\"";
  size_t i = 0;
  while (i < name.size()) {
    const size_t length = CharLength(name, i);
    if (i + (length == 0 ? 1 : length) > kMaxQuotedNameBytes) break;
    if (length == 0) {
      out += "\\ufffd";
      ++i;
    } else if (length == 1) {
      AppendEscaped(static_cast<unsigned char>(name[i]), out);
      ++i;
    } else {
      out.append(name.substr(i, length));
      i += length;
    }
  }
  out += "\"";
  if (i < name.size()) absl::StrAppend(&out, "\xE2\x80\xA6 (", name.size(), " bytes)");
  return out;
}

std::string JoinFirst(const std::vector<std::string>& names, size_t shown) {
  const size_t named = std::min(names.size(), shown);
  std::string out =
      absl::StrJoin(names.begin(), names.begin() + static_cast<ptrdiff_t>(named), ", ");
  if (names.size() > named) absl::StrAppend(&out, " and ", names.size() - named, " more");
  return out;
}

}  // namespace shardkit
