#include "server/malloc_policy.h"

#include <malloc.h>

#include <cstdlib>

namespace pc::server {

void limit_malloc_arenas(int arenas) {
  if (std::getenv("MALLOC_ARENA_MAX")) return;
  mallopt(M_ARENA_MAX, arenas);
}

void release_free_memory() { malloc_trim(0); }

}  // namespace pc::server
