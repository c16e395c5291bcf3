#include "kv/kv_namespace.h"

#include <cstring>

namespace pc {

namespace {

constexpr uint8_t kScopeBytesVersion = 1;

void put_bytes(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }

void put_string(std::string& out, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  put_bytes(out, &n, sizeof n);
  out += s;
}

// A cursor over bytes that fails (stays false) on the first read past the end.
struct Reader {
  std::string_view in;
  bool ok = true;
  void read(void* p, size_t n) {
    if (!ok || in.size() < n) {
      ok = false;
      return;
    }
    std::memcpy(p, in.data(), n);
    in.remove_prefix(n);
  }
  std::string string() {
    uint32_t n = 0;
    read(&n, sizeof n);
    if (!ok || in.size() < n) {
      ok = false;
      return {};
    }
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
};

}  // namespace

std::string scope_key(const CacheScope& scope) {
  std::string out;
  put_string(out, scope.tenant);
  put_string(out, scope.salt);
  return out;
}

std::string scope_name(const CacheScope& scope) {
  if (scope.salt.empty()) return scope.tenant;
  return scope.tenant.empty() ? "salt:" + scope.salt : scope.tenant + "/salt:" + scope.salt;
}

const char* to_string(KvKind kind) {
  switch (kind) {
    case KvKind::kExact: return "exact";
    case KvKind::kApproximate: return "approximate";
    case KvKind::kBlock: return "block";
    case KvKind::kModule: return "module";
  }
  return "unknown";
}

KvNamespace KvNamespace::as(KvKind k) const {
  KvNamespace out{model, kv_type, scope, k};
  return out;
}

KvNamespace KvNamespace::module_segment(uint64_t digest, int32_t seg) const {
  KvNamespace out = as(KvKind::kModule);
  out.module_digest = digest;
  out.segment = seg;
  return out;
}

std::string tier_scope_bytes(const KvNamespace& ns) {
  std::string out;
  out.push_back(char(kScopeBytesVersion));
  out.push_back(char(ns.kind));
  put_bytes(out, &ns.module_digest, sizeof ns.module_digest);
  put_bytes(out, &ns.segment, sizeof ns.segment);
  out += scope_key(ns.scope);
  return out;
}

bool read_tier_scope_bytes(std::string_view bytes, KvNamespace* ns) {
  Reader r{bytes};
  uint8_t version = 0, kind = 0;
  r.read(&version, 1);
  r.read(&kind, 1);
  if (!r.ok || version != kScopeBytesVersion || kind > uint8_t(KvKind::kModule)) return false;
  KvNamespace out;
  out.model = ns->model;
  out.kv_type = ns->kv_type;
  out.kind = KvKind(kind);
  r.read(&out.module_digest, sizeof out.module_digest);
  r.read(&out.segment, sizeof out.segment);
  out.scope.tenant = r.string();
  out.scope.salt = r.string();
  if (!r.ok || !r.in.empty()) return false;
  if (out.kind != KvKind::kModule && (out.module_digest != 0 || out.segment != 0)) return false;
  *ns = std::move(out);
  return true;
}

}  // namespace pc
