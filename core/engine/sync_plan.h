// Weight sync's header before it had a target of its own: kept for the programs that include it.
// Everything is in core/engine/sync.h (target //core/engine:sync).
#ifndef SHARDKIT_CORE_ENGINE_SYNC_PLAN_H_
#define SHARDKIT_CORE_ENGINE_SYNC_PLAN_H_

#include "core/engine/sync.h"  // IWYU pragma: export

#endif  // SHARDKIT_CORE_ENGINE_SYNC_PLAN_H_
