// The allow-list of the DCP pickle reader (pickle_reader.h): the module.name pairs a pickle may
// name, and how torch's pickles use each one.
#ifndef SHARDKIT_INTEGRATION_FORMATS_PICKLE_INTERNAL_PICKLE_GLOBALS_H_
#define SHARDKIT_INTEGRATION_FORMATS_PICKLE_INTERNAL_PICKLE_GLOBALS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/tensor/dtype.h"
#include "integration/formats/pickle/pickle_reader.h"

namespace shardkit::pickle::internal {

// How a global may be used: called by REDUCE, instantiated by NEWOBJ (then BUILD, once), or only
// named (dtypes, storage classes).
enum class GlobalUse : uint8_t { kReduce, kNewObj, kValue };

struct ResolvedGlobal {
  PickleGlobal global;
  DType dtype = DType::kFloat32;  // kDType, kTypedStorage: the element type
};

// The allowed global `module`.`name`, or nullopt.
std::optional<ResolvedGlobal> ResolveGlobal(std::string_view module, std::string_view name);

GlobalUse UseOf(PickleGlobal global);

// torch's legacy typed storage class of `dtype` ("FloatStorage"), or nullopt for the dtypes that
// have none (FP8, U16/U32/U64: torch.save pickles them with torch.UntypedStorage and the dtype).
std::optional<std::string_view> TypedStorageName(DType dtype);

}  // namespace shardkit::pickle::internal

#endif  // SHARDKIT_INTEGRATION_FORMATS_PICKLE_INTERNAL_PICKLE_GLOBALS_H_
