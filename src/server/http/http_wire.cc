#include "server/http/http_wire.h"

#include <cstdio>

namespace pc::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool has_body(int status) { return status >= 200 && status != 204 && status != 304; }

}  // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += char(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_is_space && c == '+' ? ' ' : c;
  }
  return out;
}

void split_target(std::string_view target, std::string* path, std::multimap<std::string, std::string>* params) {
  const size_t q = target.find('?');
  *path = percent_decode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    params->emplace(percent_decode(pair.substr(0, eq), true),
                    eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true));
  }
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string response_head(const HttpResponse& res, int version, bool keep_alive, bool chunked,
                          size_t content_length) {
  std::string h = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  h += std::to_string(res.status);
  h += ' ';
  h += reason_phrase(res.status);
  h += "\r\n";
  for (const auto& [name, value] : res.headers) {
    h += name;
    h += ": ";
    h += value;
    h += "\r\n";
  }
  if (has_body(res.status)) {
    if (chunked) h += "Transfer-Encoding: chunked\r\n";
    else if (content_length != size_t(-1)) h += "Content-Length: " + std::to_string(content_length) + "\r\n";
  }
  if (!keep_alive) h += "Connection: close\r\n";
  else if (version == 10) h += "Connection: keep-alive\r\n";
  h += "\r\n";
  return h;
}

std::string chunk_frame(const char* data, size_t n) {
  char size[20];
  const int len = std::snprintf(size, sizeof size, "%zx\r\n", n);
  std::string out;
  out.reserve(size_t(len) + n + 2);
  out.append(size, size_t(len));
  out.append(data, n);
  out += "\r\n";
  return out;
}

}  // namespace pc::server
