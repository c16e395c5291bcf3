// Where approximately built KV is published: a namespace of its own per tenant, which
// only approximate requests look in, so an exact request never sees it and never
// writes to it.
#pragma once
#include "kv/kv_namespace.h"

namespace pc {

KvNamespace approximate_ns(const KvNamespace& ns);

}  // namespace pc
