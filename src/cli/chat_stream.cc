#include "cli/chat_stream.h"

#include <chrono>

namespace pc::cli {

using json = nlohmann::json;

StreamedChat stream_chat(httplib::Client& cli, const std::string& body) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  StreamedChat out;
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
      const std::string ev = buf.substr(0, end);
      if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
      const json j = json::parse(ev.substr(6), nullptr, false);
      if (j.is_discarded() || j.contains("error")) {
        if (out.error.empty())
          out.error = j.is_discarded() ? "unparsable event" : j["error"].value("message", "error event");
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) out.usage = j["usage"];
      if (j.contains("promptcache") && j["promptcache"].is_object()) out.promptcache = j["promptcache"];
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const json delta = j["choices"][0].value("delta", json::object());
        if (delta.contains("content") && delta["content"].is_string()) {
          const std::string piece = delta["content"];
          if (out.ttft_ms < 0 && !piece.empty())
            out.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          out.text += piece;
        }
      }
    }
    return true;
  };
  const httplib::Result res = cli.send(req);
  if (!res)
    out.error = "HTTP: " + httplib::to_string(res.error());
  else if (res->status != 200)
    out.error = "HTTP status " + std::to_string(res->status) + ": " + (res->body.empty() ? buf : res->body);
  else if (out.error.empty() && out.usage.is_null())
    out.error = "no usage in the stream";
  return out;
}

}  // namespace pc::cli
