#include "engine/approximate/approximate_namespace.h"

namespace pc {

KvNamespace approximate_ns(const KvNamespace& ns) {
  return ns.as(KvKind::kApproximate);
}

}  // namespace pc
