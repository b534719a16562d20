#include "integration/formats/safetensors/internal/header_sax.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

#include "nlohmann/json.hpp"

namespace shardkit::safetensors::internal {
namespace {

using Json = nlohmann::json;

inline constexpr size_t kMaxDims = 64;

// Every event either fits the state or ends the parse (false): the caller falls back.
class HeaderSax : public nlohmann::json_sax<Json> {
 public:
  RawHeader& header() { return header_; }

  bool null() override { return false; }
  bool boolean(bool) override { return false; }
  bool number_integer(number_integer_t) override { return false; }  // negative
  bool number_float(number_float_t, const string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }

  bool number_unsigned(number_unsigned_t value) override {
    if (state_ != State::kShape && state_ != State::kOffsets) return false;
    RawEntry& entry = header_.tensors.back();  // a tensor's array is open
    if (state_ == State::kShape) {
      if (entry.shape.size() >= kMaxDims || value > static_cast<uint64_t>(INT64_MAX)) return false;
      entry.shape.push_back(static_cast<int64_t>(value));
      return true;
    }
    if (offsets_ >= 2) return false;
    (offsets_++ == 0 ? entry.begin : entry.end) = value;
    return true;
  }

  bool string(string_t& value) override {
    if (state_ == State::kMetadataValue) {
      state_ = State::kMetadata;
      return header_.metadata.emplace(std::move(key_), std::move(value)).second;
    }
    if (state_ != State::kEntryValue || key_ != "dtype") return false;
    header_.tensors.back().dtype = std::move(value);
    state_ = State::kEntry;
    return true;
  }

  bool start_object(std::size_t) override {
    switch (state_) {
      case State::kStart:
        state_ = State::kTop;
        return true;
      case State::kTopValue:
        if (key_ == "__metadata__") {
          if (seen_metadata_) return false;
          seen_metadata_ = true;
          state_ = State::kMetadata;
        } else {
          header_.tensors.push_back(RawEntry{std::move(key_), {}, {}, 0, 0});
          fields_ = 0;
          state_ = State::kEntry;
        }
        return true;
      default:
        return false;
    }
  }

  bool key(string_t& value) override {
    if (state_ == State::kTop || state_ == State::kMetadata) {
      key_ = std::move(value);
      state_ = state_ == State::kTop ? State::kTopValue : State::kMetadataValue;
      return true;
    }
    if (state_ != State::kEntry) return false;
    const int field = value == "dtype" ? 1 : value == "shape" ? 2 : value == "data_offsets" ? 4 : 0;
    if (field == 0 || (fields_ & field) != 0) return false;  // unknown or repeated
    fields_ |= field;
    key_ = std::move(value);
    state_ = State::kEntryValue;
    return true;
  }

  bool end_object() override {
    if (state_ == State::kMetadata) {
      state_ = State::kTop;
      return true;
    }
    if (state_ == State::kEntry && fields_ == 7) {
      state_ = State::kTop;
      return true;
    }
    if (state_ != State::kTop) return false;
    state_ = State::kDone;
    return true;
  }

  bool start_array(std::size_t) override {
    if (state_ != State::kEntryValue || key_ == "dtype") return false;
    state_ = key_ == "shape" ? State::kShape : State::kOffsets;
    offsets_ = 0;
    return true;
  }

  bool end_array() override {
    if (state_ == State::kOffsets && offsets_ != 2) return false;
    if (state_ != State::kShape && state_ != State::kOffsets) return false;
    state_ = State::kEntry;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kStart,
    kTop,            // in the top object, between members
    kTopValue,       // after a top-level key
    kMetadata,       // in __metadata__, between members
    kMetadataValue,  // after a __metadata__ key
    kEntry,          // in a tensor's object, between members
    kEntryValue,     // after a tensor's field name
    kShape,
    kOffsets,
    kDone,
  };

  RawHeader header_;
  State state_ = State::kStart;
  std::string key_;
  int fields_ = 0;  // the tensor's fields seen: dtype 1, shape 2, data_offsets 4
  int offsets_ = 0;
  bool seen_metadata_ = false;
};

// Sorts by name, as the DOM path visits them; true if two share one.
bool SortAndFindDuplicate(std::vector<RawEntry>& tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const RawEntry& a, const RawEntry& b) { return a.name < b.name; });
  return std::adjacent_find(tensors.begin(), tensors.end(),
                            [](const RawEntry& a, const RawEntry& b) {
                              return a.name == b.name;
                            }) != tensors.end();
}

}  // namespace

std::optional<RawHeader> ParseWellFormedHeader(std::string_view json) {
  // The DOM path rejects NUL bytes before nlohmann's lexer (which stops at one) sees them.
  if (json.find('\0') != std::string_view::npos) return std::nullopt;
  HeaderSax sax;
  try {
    if (!Json::sax_parse(json.begin(), json.end(), &sax, nlohmann::detail::input_format_t::json,
                         /*strict=*/true)) {
      return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!sax.done() || SortAndFindDuplicate(sax.header().tensors)) return std::nullopt;
  return std::move(sax.header());
}

}  // namespace shardkit::safetensors::internal
