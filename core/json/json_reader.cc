#include "core/json/json_reader.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace shardkit::json {
namespace {

absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Bytes >= 0x80 of an error message written as \xNN: nlohmann quotes the raw input, which may be
// invalid UTF-8, and messages must stay printable and embeddable in JSON.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x80) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// Builds the DOM through nlohmann's SAX interface so that duplicate keys and excessive nesting
// are caught with their path (the DOM parser silently keeps the last duplicate).
class StrictDomBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit StrictDomBuilder(std::string_view text) : text_(text) {}

  Json& root() { return root_; }
  const absl::Status& error() const { return error_; }

  bool null() override { return Add(Json(nullptr)); }
  bool boolean(bool value) override { return Add(Json(value)); }
  bool number_integer(number_integer_t value) override { return Add(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Add(Json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return Add(Json(value)); }
  bool string(string_t& value) override { return Add(Json(std::move(value))); }
  bool binary(binary_t&) override { return Fail(PathError(Path(), "binary values are not JSON")); }

  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool key(string_t& value) override {
    Frame& frame = frames_.back();
    // Every earlier member of this object is in it already (Add inserts before the next key).
    if (frame.container->contains(value)) {
      return Fail(PathError(Path(/*into_last=*/false),
                            absl::StrCat("duplicate key ", DescribeValue(Json(value)))));
    }
    frame.key = std::move(value);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string_view what = ex.what();
    if (size_t end = what.find("] "); what.substr(0, 1) == "[" && end != std::string_view::npos) {
      what.remove_prefix(end + 2);
    }
    std::string message(what);
    if (what.substr(0, 11) != "parse error") {
      auto [line, column] = LineColumn(position);
      message = absl::StrCat("parse error at line ", line, ", column ", column, ": ", message);
    }
    return Fail(absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", Printable(message))));
  }

 private:
  struct Frame {
    Json* container;
    std::string key;  // objects: the member being read
  };

  std::pair<size_t, size_t> LineColumn(size_t position) const {
    position = std::min(position, text_.size());
    const std::string_view before = text_.substr(0, position);
    const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    const size_t last_newline = before.rfind('\n');
    const size_t column =
        last_newline == std::string_view::npos ? position : position - last_newline - 1;
    return {line, column};
  }

  // "rules[1].spec": the path of the innermost open container, or with `into_last` of the value
  // about to be added to it. An open array's last element is the open child, if any.
  std::string Path(bool into_last = true) const {
    std::string path;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const bool last = i + 1 == frames_.size();
      if (last && !into_last) break;
      const Json& container = *frames_[i].container;
      if (container.is_array()) {
        path = IndexPath(path, last ? container.size() : container.size() - 1);
      } else {
        path = ChildPath(path, frames_[i].key);
      }
    }
    return path;
  }

  Json* Add(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& container = *frames_.back().container;
    if (container.is_array()) {
      container.push_back(std::move(value));
      return &container.back();
    }
    Json& slot = container[frames_.back().key];
    slot = std::move(value);
    return &slot;
  }

  bool Open(Json empty) {
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(
          PathError(Path(), absl::StrCat("JSON nesting deeper than ", kMaxJsonDepth, " levels")));
    }
    Json* child = Add(std::move(empty));
    frames_.push_back(Frame{child, {}});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    return true;
  }

  bool Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
    return false;
  }

  std::string_view text_;
  Json root_;
  std::vector<Frame> frames_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text) {
  // nlohmann's lexer takes a NUL byte for the end of the input and ignores what follows; JSON text
  // never holds a raw NUL (inside strings it must be escaped), so reject it outright.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON: NUL byte at offset ", nul, " (JSON text cannot contain one)"));
  }
  StrictDomBuilder builder(text);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                         /*strict=*/true);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", Printable(e.what())));
  }
  if (!ok) {
    if (!builder.error().ok()) return builder.error();
    return absl::InvalidArgumentError("invalid JSON");
  }
  return std::move(builder.root());
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string ChildPath(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return absl::StrCat(ToAbsl(path), ".", ToAbsl(key));
}

std::string IndexPath(std::string_view path, size_t index) {
  return absl::StrCat(ToAbsl(path), "[", index, "]");
}

std::string DescribeValue(const Json& value) {
  constexpr size_t kMaxChars = 40;
  switch (value.type()) {
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      if (s.size() <= kMaxChars) return Dump(value);
      size_t cut = kMaxChars;
      while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
      return absl::StrCat(Dump(Json(s.substr(0, cut))), "...");
    }
    default:
      return Dump(value);
  }
}

absl::Status PathError(std::string_view path, std::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(path.empty() ? "top level" : ToAbsl(path), ": ", ToAbsl(message)));
}

absl::Status AtPath(std::string_view path, const absl::Status& status) {
  return path.empty() ? status : Annotate(status, path);
}

absl::Status TypeError(std::string_view path, std::string_view expected, const Json& got) {
  return PathError(path, absl::StrCat("expected ", ToAbsl(expected), ", got ", DescribeValue(got)));
}

absl::Status CheckObject(const Json& value, std::string_view path,
                         std::initializer_list<std::string_view> allowed) {
  if (!value.is_object()) return TypeError(path, "object", value);
  for (const auto& [key, member] : value.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::vector<std::string> names(allowed.begin(), allowed.end());
    std::sort(names.begin(), names.end());
    return PathError(path, absl::StrCat("unknown key ", DescribeValue(Json(key)), " (expected ",
                                        absl::StrJoin(names, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Json*> Required(const Json& object, std::string_view path,
                                     std::string_view key) {
  const Json* member = Optional(object, key);
  if (member == nullptr) {
    return PathError(path, absl::StrCat("missing key \"", ToAbsl(key), "\""));
  }
  return member;
}

const Json* Optional(const Json& object, std::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

namespace {

// `value` as an int64, or nullopt when it is not an integer or does not fit (GetInt words why).
std::optional<int64_t> AsInt64(const Json& value) {
  if (value.is_number_unsigned()) {  // non-negative integers are stored unsigned
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

}  // namespace

absl::StatusOr<int64_t> GetInt(const Json& value, std::string_view path) {
  if (std::optional<int64_t> v = AsInt64(value)) return *v;
  if (value.is_number_unsigned()) {
    return PathError(path,
                     absl::StrCat("integer ", value.get<uint64_t>(), " does not fit in 64 bits"));
  }
  return TypeError(path, "integer", value);
}

absl::StatusOr<std::string> GetString(const Json& value, std::string_view path) {
  if (!value.is_string()) return TypeError(path, "string", value);
  return value.get<std::string>();
}

absl::StatusOr<std::vector<int64_t>> GetIntArray(const Json& value, std::string_view path) {
  if (!value.is_array()) return TypeError(path, "array of integers", value);
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    // The element's path is built only for the error.
    if (std::optional<int64_t> v = AsInt64(value[i])) {
      out.push_back(*v);
      continue;
    }
    return GetInt(value[i], IndexPath(path, i)).status();
  }
  return out;
}

absl::Status CheckVersion(const Json& object, std::string_view path) {
  const Json* version = Optional(object, "version");
  if (version == nullptr) return absl::OkStatus();
  const std::string version_path = ChildPath(path, "version");
  SHARDKIT_ASSIGN_OR_RETURN(int64_t v, GetInt(*version, version_path));
  if (v != 1)
    return PathError(version_path, absl::StrCat("unsupported version ", v, " (expected 1)"));
  return absl::OkStatus();
}

}  // namespace shardkit::json
