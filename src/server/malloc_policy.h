// glibc malloc settings for a server whose requests make large transient heaps
// (a multi-megabyte schema compiled, a long chat body parsed) on many handler threads.
//
// Measured with bench/rss_transient.py (5 schemas of 100,000 modules stored, then
// deleted): by default every handler thread gets its own arena and the garbage one
// thread leaves is not reused by the next, so RSS peaked at 1,457 MiB; with 2 arenas
// 756 MiB, with 1 519 MiB. Freed memory inside an arena stays resident until
// malloc_trim returns it to the kernel. docs/api.md "Memory" has the figures.
#pragma once

namespace pc::server {

// Caps glibc's malloc arenas (M_ARENA_MAX) unless MALLOC_ARENA_MAX is set in the
// environment, which wins. Call once at startup, before threads start.
void limit_malloc_arenas(int arenas);

// Gives free heap pages back to the kernel (malloc_trim). Costs milliseconds: call
// after freeing something large, not per request.
void release_free_memory();

}  // namespace pc::server
