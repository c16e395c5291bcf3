// A generation request on its way through the server, shared by the OpenAI
// routes (generation_routes.cc) and the PML route (pml_routes.cc): submit the
// job, then answer whole or as server-sent events.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <httplib.h>

#include "server/conversation.h"
#include "server/job.h"
#include "server/openai.h"
#include "server/state.h"

namespace pc::server {

struct Generation {
  CommonParams params;
  std::string ns;
  ResponseMeta meta;
  int64_t prompt_tokens = 0;       // what usage.prompt_tokens reports
  std::optional<ChatPrompt> chat;  // chat requests
  MissReport miss;                 // chat: the first divergence from the request it continues
  bool pml = false;                // a PML plan (module hits in the report)
  std::shared_ptr<Job> job;
  // Held from submit() until the response is written (Server::generations_in_flight):
  // a stream's Generation lives in its content provider, which httplib keeps until
  // the last chunk went out.
  std::shared_ptr<void> in_flight;
};

// Chat request helpers shared with POST /apply-template (llama_routes.cc).
// 400 naming the message unless `messages` is a non-empty array of {role, content}.
void check_messages(const json& body);
// Content parts ([{"type":"text","text":...}]) joined into one string, as templates expect.
json flatten_content(json messages);
// The template's extra variables: chat_template_kwargs, tools (unless tool_choice is
// "none"), documents.
json chat_extra(const json& body);
// The server's chat template; ApiError 400 no_chat_template when it has none.
const ChatTemplate& chat_template_of(const Server::State& st);

// Queues g.job (built by the caller); ApiError 503 `server_draining` while the server
// drains, 503 `server_overloaded` when the queue is full.
void submit(Server::State& st, Generation& g);

// Waits for the job and answers: one JSON response, or (params.stream) events as
// the text comes. A client that disconnects cancels the job either way.
void respond(Server::State& st, std::shared_ptr<Generation> g, const httplib::Request& req,
             httplib::Response& res);

}  // namespace pc::server
