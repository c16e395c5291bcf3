#include "server/http/http.h"

#include <strings.h>

namespace pc::server {

namespace {

std::string header_value(const HttpHeaders& h, const std::string& name) {
  const auto it = h.find(name);
  return it == h.end() ? "" : it->second;
}

}  // namespace

bool HeaderNameLess::operator()(const std::string& a, const std::string& b) const {
  return ::strcasecmp(a.c_str(), b.c_str()) < 0;
}

bool HttpRequest::has_header(const std::string& name) const { return headers.count(name) > 0; }
std::string HttpRequest::get_header_value(const std::string& name) const { return header_value(headers, name); }
bool HttpRequest::has_param(const std::string& name) const { return params.count(name) > 0; }

std::string HttpRequest::get_param_value(const std::string& name) const {
  const auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

HttpResponse::~HttpResponse() {
  if (releaser) releaser(stream_succeeded);
}

void HttpResponse::set_header(const std::string& name, const std::string& value) {
  headers.erase(name);
  headers.emplace(name, value);
}

bool HttpResponse::has_header(const std::string& name) const { return headers.count(name) > 0; }
std::string HttpResponse::get_header_value(const std::string& name) const { return header_value(headers, name); }

void HttpResponse::set_content(std::string content, const std::string& content_type) {
  body = std::move(content);
  set_header("Content-Type", content_type);
}

void HttpResponse::set_chunked_content_provider(const std::string& content_type, ContentProvider p,
                                                ContentReleaser r) {
  provider = std::move(p);
  releaser = std::move(r);
  set_header("Content-Type", content_type);
}

}  // namespace pc::server
