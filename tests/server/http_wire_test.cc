// The HTTP message text of src/server/http/http_wire.h: exact strings.
#include "server/http/http_wire.h"

#include <gtest/gtest.h>

namespace pc::server {
namespace {

TEST(HttpWire, TargetSplitsAndDecodes) {
  std::string path;
  std::multimap<std::string, std::string> params;
  split_target("/v1/schemas/a%20b?preload=true&cache_salt=x+y%2Fz&flag&&=v", &path, &params);
  EXPECT_EQ(path, "/v1/schemas/a b");
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params.find("preload")->second, "true");
  EXPECT_EQ(params.find("cache_salt")->second, "x y/z");
  EXPECT_EQ(params.find("flag")->second, "");
  EXPECT_EQ(params.find("")->second, "v");
  // A malformed escape stays as sent; '+' in a path is a plus.
  EXPECT_EQ(percent_decode("a%2 b%zz+%41", false), "a%2 b%zz+A");
}

TEST(HttpWire, ResponseHeads) {
  HttpResponse res;
  res.status = 200;
  res.set_content("{}", "application/json");
  EXPECT_EQ(response_head(res, 11, true, false, 2),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(response_head(res, 11, false, true, 0),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n");
  EXPECT_EQ(response_head(res, 10, true, false, 2),
            "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n");
  HttpResponse empty;
  empty.status = 204;
  empty.set_header("Allow", "GET, OPTIONS");
  EXPECT_EQ(response_head(empty, 11, true, false, 0), "HTTP/1.1 204 No Content\r\nAllow: GET, OPTIONS\r\n\r\n");
  EXPECT_EQ(chunk_frame("data: x\n\n", 9), "9\r\ndata: x\n\n\r\n");
  EXPECT_EQ(chunk_frame(std::string(26, 'a').data(), 26).substr(0, 4), "1a\r\n");
}

TEST(HttpWire, HeaderNamesIgnoreCase) {
  HttpRequest req;
  req.headers.emplace("Content-Type", "text/plain");
  EXPECT_TRUE(req.has_header("content-type"));
  EXPECT_EQ(req.get_header_value("CONTENT-TYPE"), "text/plain");
  EXPECT_EQ(req.get_header_value("Accept"), "");
  HttpResponse res;
  res.set_header("X-A", "1");
  res.set_header("x-a", "2");  // replaces
  EXPECT_EQ(res.headers.size(), 1u);
  EXPECT_EQ(res.get_header_value("X-A"), "2");
}

TEST(HttpWire, ReleaserRunsOnceWithTheOutcome) {
  int calls = 0;
  bool success = false;
  {
    HttpResponse res;
    res.set_chunked_content_provider("text/event-stream", [](size_t, DataSink&) { return false; },
                                     [&](bool ok) {
                                       ++calls;
                                       success = ok;
                                     });
    res.stream_succeeded = true;
  }
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(success);
}

}  // namespace
}  // namespace pc::server
