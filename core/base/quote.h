// Names in error messages: how every layer quotes a parameter, tensor or pattern name it did not
// choose (a checkpoint's tensor names are hostile input), so that messages show them alike.
//
//   absl::StrCat("parameter ", QuoteName(name), ": dim 2 is out of range")
//   // parameter "model.layers.12.self_attn.q_proj.weight": dim 2 is out of range
#ifndef SHARDKIT_CORE_BASE_QUOTE_H_
#define SHARDKIT_CORE_BASE_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardkit {

// Names longer than this many bytes are cut in messages.
inline constexpr size_t kMaxQuotedNameBytes = 1024;

// `name` as a JSON string literal: whole, in double quotes, with '"', '\' and control characters
// escaped (\n, \t, …, else \u00XX) and each byte that is not part of valid UTF-8 written as
// \ufffd, so that what a terminal shows is what the name holds. A name of more than
// kMaxQuotedNameBytes bytes keeps its first kMaxQuotedNameBytes bytes (fewer, to end on a
// character boundary), followed by an ellipsis and its length:
// "model.layers.0.…"… (5000 bytes).
std::string QuoteName(std::string_view name);

// The first `shown` of `names` joined by ", ", then " and N more" for the N others (nothing when
// there are none): how messages list a few of many names ("a, b, c and 2 more"). The names are
// written as given (sorted or quoted by the caller).
std::string JoinFirst(const std::vector<std::string>& names, size_t shown);

// Whether `text` is well-formed UTF-8 — no overlong forms, surrogates or code points above
// U+10FFFF — as QuoteName judges it (and as Python's str decoder and JSON require).
bool IsValidUtf8(std::string_view text);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_BASE_QUOTE_H_
