// HTTP/1.1 message text: the request target's parts and the response head and
// chunks as they go on the wire (RFC 9112).
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "server/http/http.h"

namespace pc::server {

// %XX sequences decoded (a malformed one is kept as is); '+' as a space when asked
// (query strings).
std::string percent_decode(std::string_view s, bool plus_is_space);
// "/a%20b?x=1&y" → path "/a b", params {x: "1", y: ""}.
void split_target(std::string_view target, std::string* path, std::multimap<std::string, std::string>* params);

const char* reason_phrase(int status);

// Status line and headers, through the blank line. A body of `content_length`
// bytes follows, or (chunked) chunks; `keep_alive` false adds Connection: close.
// Statuses without a body (1xx, 204, 304) get no length header.
std::string response_head(const HttpResponse& res, int version, bool keep_alive, bool chunked,
                          size_t content_length);
// One chunk of the chunked encoding; the last chunk is kLastChunk.
std::string chunk_frame(const char* data, size_t n);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace pc::server
