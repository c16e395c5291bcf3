#include "engine/approximate/approximate_namespace.h"

namespace pc {

KvNamespace approximate_ns(const KvNamespace& ns) {
  return KvNamespace{ns.model, ns.kv_type, ns.tenant + "\x1f" "approximate"};
}

}  // namespace pc
