// Assertions of the kv layer, in two tiers (see STYLE.md "Errors"):
//   PC_KV_CHECK   always on: API preconditions and refcount invariants at the
//                 boundaries of the pool, page table and radix index. A failure is a
//                 bug in the caller, reported as std::logic_error.
//   PC_KV_DCHECK  debug builds only: checks inside loops on the hot path.
#pragma once
#include <stdexcept>
#include <string>

#define PC_KV_CHECK(cond, msg)                                                   \
  do {                                                                           \
    if (!(cond)) throw std::logic_error(std::string("kv: ") + (msg) + " (" #cond ")"); \
  } while (0)

#ifdef NDEBUG
#define PC_KV_DCHECK(cond, msg) \
  do {                          \
  } while (0)
#else
#define PC_KV_DCHECK(cond, msg) PC_KV_CHECK(cond, msg)
#endif
