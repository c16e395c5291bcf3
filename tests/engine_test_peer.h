// What tests may see of an engine besides its public face: the caches' own
// structures, to check invariants and exact page accounting. Production code has no
// way in; Engine and PrefixCache name this type as a friend for tests only.
#pragma once
#include "engine/engine.h"
#include "engine/kv_tiers.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "kv/module_store.h"
#include "kv/page_pool.h"
#include "kv/radix_index.h"

namespace pc {

struct EngineTestPeer {
  static RadixIndex& index(Engine& e) { return e.prefix_->index_; }
  static PrefixCache& prefix(Engine& e) { return *e.prefix_; }
  static ModuleStore& modules(Engine& e) { return e.modules_->store(); }
  static KvTiers* tiers(Engine& e) { return e.tiers_.get(); }  // null when none is configured
  static PagePool& page_pool(Engine& e) { return *e.pages_; }
  // Preempts a running sequence as a step short of pages would.
  static void preempt(Engine& e, int64_t id) { e.preempt(*e.active_.at(id)); }
};

}  // namespace pc
