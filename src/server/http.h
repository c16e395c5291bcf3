// The HTTP request and response types the route handlers work with.
#pragma once
#include <httplib.h>

namespace pc::server {

using HttpRequest = HttpRequest;
using HttpResponse = HttpResponse;
using DataSink = DataSink;

}  // namespace pc::server
