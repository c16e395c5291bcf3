// The official `openai` npm client against a running `promptcache serve`
// (base URL in PC_SERVER_URL, e.g. http://127.0.0.1:8080/v1). Exits non-zero on
// the first failed check. Run by tests/server/js_client_test.cc.
import assert from "node:assert/strict";
// The client runs on Node's built-in fetch and web streams (Node >= 18) rather
// than on its default transport, node-fetch 2. On a chunked response node-fetch 2
// takes a 'data' listener left on the socket when the response closes for a
// truncated body ("Premature close"), and Node builds whose http.Agent puts such a
// listener on keep-alive sockets as they go back to the pool (Debian 12's nodejs,
// guarding idle sockets against unsolicited data) then fail every streamed (SSE)
// response. This import must come before the one of "openai".
import "openai/shims/web";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.PC_SERVER_URL, apiKey: "unused", maxRetries: 0 });
const model = process.env.PC_MODEL_ID ?? "stories260K";

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 0,
});
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.ok(chat.choices[0].message.content.length > 0);
assert.equal(typeof chat.usage.prompt_tokens_details.cached_tokens, "number");

let streamed = "";
let usage = null;
const chatStream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 0,
  stream: true, stream_options: { include_usage: true },
});
for await (const chunk of chatStream) {
  if (chunk.usage) usage = chunk.usage;
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
assert.equal(streamed, chat.choices[0].message.content);
assert.ok(usage && usage.prompt_tokens_details.cached_tokens > 0, "the repeated prompt hits");

const completion = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0,
});
assert.equal(completion.object, "text_completion");
assert.ok(completion.choices[0].text.length > 0);

let text = "";
const stream = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true,
});
for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
assert.equal(text, completion.choices[0].text);

const models = await client.models.list();
assert.equal(models.data[0].id, model);

await assert.rejects(
  client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
  (e) => e.status === 404,
);
console.log("openai js client: all checks passed");
