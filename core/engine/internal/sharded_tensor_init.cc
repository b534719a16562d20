#include "core/engine/internal/sharded_tensor_init.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "specs/spec_json.h"

namespace shardkit::internal {
namespace {

using Json = nlohmann::json;
using specs::ShardMetadata;

// What one rank offers, as exchanged.
struct Offer {
  Shape shape;
  std::optional<DType> dtype;  // nullopt: the rank offers no shard
  bool requires_grad = false;
  std::vector<ShardMetadata> shards;
  std::string error;  // local problem, or empty
};

absl::Status CheckOffer(const std::vector<Shard>& local, int rank, Offer& offer) {
  for (size_t k = 0; k < local.size(); ++k) {
    const Shard& shard = local[k];
    SHARDKIT_RETURN_IF_ERROR(specs::ValidateShardMetadata(shard.metadata));
    if (shard.metadata.placement.rank() != rank) {
      return absl::InvalidArgumentError(absl::StrCat("local shard ", k, " is placed on ",
                                                     shard.metadata.placement.ToString(),
                                                     ", not on this rank"));
    }
    if (shard.tensor.is_meta() || shard.tensor.shape() != shard.metadata.sizes) {
      return absl::InvalidArgumentError(
          absl::StrCat("local shard ", k, " holds ", shard.tensor.DebugString(),
                       " but its metadata says sizes ", ShapeToString(shard.metadata.sizes)));
    }
    if (k > 0 && (shard.tensor.dtype() != *offer.dtype ||
                  shard.tensor.requires_grad() != offer.requires_grad)) {
      return absl::InvalidArgumentError(
          absl::StrCat("local shards 0 and ", k, " differ in dtype or requires_grad"));
    }
    offer.dtype = shard.tensor.dtype();
    offer.requires_grad = shard.tensor.requires_grad();
    offer.shards.push_back(shard.metadata);
  }
  return absl::OkStatus();
}

std::string Encode(const Offer& offer) {
  Json json = {
      {"shape", offer.shape}, {"requires_grad", offer.requires_grad}, {"error", offer.error}};
  json["dtype"] = offer.dtype ? Json(std::string(DTypeName(*offer.dtype))) : Json(nullptr);
  json["shards"] = offer.shards.empty()
                       ? std::string()
                       : specs::CanonicalJson(specs::EnumerableShardingSpec{offer.shards});
  return json.dump();
}

absl::StatusOr<Offer> Decode(const std::string& text) {
  Offer offer;
  try {
    Json json = Json::parse(text);
    offer.shape = json.at("shape").get<Shape>();
    offer.requires_grad = json.at("requires_grad").get<bool>();
    offer.error = json.at("error").get<std::string>();
    if (!json.at("dtype").is_null()) {
      SHARDKIT_ASSIGN_OR_RETURN(offer.dtype, ParseDType(json.at("dtype").get<std::string>()));
    }
    const std::string shards = json.at("shards").get<std::string>();
    if (!shards.empty()) {
      SHARDKIT_ASSIGN_OR_RETURN(specs::ShardingSpec spec, specs::ParseSpec(shards));
      offer.shards = std::get<specs::EnumerableShardingSpec>(spec).shards;
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("malformed shard offer from a peer: ", e.what()));
  }
  return offer;
}

// The first disagreement among ranks on a property, as "rank A has X, rank B has Y".
template <typename Get>
std::optional<std::string> FindDisagreement(const std::vector<Offer>& offers, Get get) {
  std::optional<size_t> first;
  for (size_t r = 0; r < offers.size(); ++r) {
    auto value = get(offers[r]);
    if (!value) continue;
    if (!first) {
      first = r;
    } else if (*value != *get(offers[*first])) {
      return absl::StrCat("rank ", *first, " has ", *get(offers[*first]), ", rank ", r, " has ",
                          *value);
    }
  }
  return std::nullopt;
}

absl::Status CheckOffers(const std::vector<Offer>& offers, const Shape& tiling_shape) {
  std::vector<std::string> errors;
  for (size_t r = 0; r < offers.size(); ++r) {
    if (!offers[r].error.empty()) errors.push_back(absl::StrCat("rank ", r, ": ", offers[r].error));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  auto shape = FindDisagreement(
      offers, [](const Offer& o) { return std::optional<std::string>(ShapeToString(o.shape)); });
  if (shape) return absl::InvalidArgumentError("ranks disagree on the global shape: " + *shape);
  auto dtype = FindDisagreement(offers, [](const Offer& o) -> std::optional<std::string> {
    if (!o.dtype) return std::nullopt;
    return std::string(DTypeName(*o.dtype));
  });
  if (dtype) return absl::InvalidArgumentError("ranks disagree on the dtype: " + *dtype);
  auto grad = FindDisagreement(offers, [](const Offer& o) -> std::optional<std::string> {
    if (!o.dtype) return std::nullopt;
    return o.requires_grad ? "requires_grad=true" : "requires_grad=false";
  });
  if (grad) return absl::InvalidArgumentError("ranks disagree on requires_grad: " + *grad);
  std::vector<ShardMetadata> all;
  for (const Offer& offer : offers) all.insert(all.end(), offer.shards.begin(), offer.shards.end());
  return specs::ValidateTiling(all, tiling_shape);
}

}  // namespace

absl::StatusOr<GlobalShardList> AgreeOnLocalShards(const std::vector<Shard>& local,
                                                   const Shape& global_shape, Communicator& comm,
                                                   const CallOptions& options) {
  Offer mine;
  mine.shape = global_shape;
  if (absl::Status s = ComputeShapeSize(global_shape, DType::kUInt8).status(); !s.ok()) {
    mine.error = std::string(s.message());
  } else if (absl::Status c = CheckOffer(local, comm.rank(), mine); !c.ok()) {
    mine.error = std::string(c.message());
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            comm.AllGather(ConstBuffer(Encode(mine)), options));
  std::vector<Offer> offers;
  for (const std::string& text : all) {
    SHARDKIT_ASSIGN_OR_RETURN(Offer offer, Decode(text));
    offers.push_back(std::move(offer));
  }
  SHARDKIT_RETURN_IF_ERROR(Annotate(CheckOffers(offers, global_shape), "InitFromLocalShards"));
  GlobalShardList global;
  for (size_t r = 0; r < offers.size(); ++r) {
    if (static_cast<int>(r) == comm.rank()) global.first_local_index = global.shards.size();
    if (offers[r].dtype) {
      global.dtype = *offers[r].dtype;
      global.requires_grad = offers[r].requires_grad;
    }
    global.shards.insert(global.shards.end(), offers[r].shards.begin(), offers[r].shards.end());
  }
  return global;
}

}  // namespace shardkit::internal
