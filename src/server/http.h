// The HTTP request and response types the route handlers work with.
#pragma once
#include <httplib.h>

namespace pc::server {

using HttpRequest = httplib::Request;
using HttpResponse = httplib::Response;
using DataSink = httplib::DataSink;

}  // namespace pc::server
