// Whether the client of a request is still connected, for handlers that wait
// without writing anything (non-streamed generations), so that a client that
// gave up cancels its sequence instead of leaving it to run to max_tokens.
//
// cpp-httplib 0.11 gives handlers no access to their socket (later releases have
// Request::is_connection_closed), so the socket is found once among the
// process's descriptors by the request's local and remote addresses, which name
// exactly one TCP connection. The handler runs inside httplib's processing of
// that connection, so the descriptor stays ours while it runs.
#pragma once
#include "server/http.h"

namespace pc::server {

class ConnectionWatch {
 public:
  explicit ConnectionWatch(const HttpRequest& req);
  // True once the peer closed or reset the connection. Never true when the
  // socket was not found. A client that half-closes (shutdown(SHUT_WR)) while
  // waiting for its answer is taken as gone, as newer httplib does.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace pc::server
