// Structured output with the real npm clients against a running
// `promptcache serve --test-hooks` (PC_SERVER_URL, the server's root, e.g.
// http://127.0.0.1:8080): the AI SDK's generateObject on openai() (Responses,
// text.format), openai.chat() (response_format) and @ai-sdk/anthropic (both of its
// modes: output_config.format, and a forced "json" tool), LangChain's
// withStructuredOutput on ChatOpenAI (its json-schema and function-calling methods)
// and ChatAnthropic (a forced tool). Exits non-zero on the first failed check. Run by
// tests/server/js_client_test.cc.
//
// Where the reply is constrained by a grammar (response_format, text.format,
// output_config.format, a strict tool) the random test model's output must already
// satisfy the schema: nothing is forced. A forced call of a tool that is not strict is
// not constrained, so a fetch wrapper gives those requests the --test-hooks field
// test_forced_reply: the rest of the call, in the Qwen2.5 template's format, after the
// opener the server writes.
import assert from "node:assert/strict";
import { generateObject } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { ChatOpenAI } from "@langchain/openai";
import { ChatAnthropic } from "@langchain/anthropic";
import { z } from "zod";

const root = process.env.PC_SERVER_URL;
const model = process.env.PC_MODEL_ID ?? "stories260K";

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  pet: z.enum(["cat", "dog", "none"]),
});
const forcedArgs = { name: "Ann", age: 7, pet: "cat" };
// What Anthropic's structured outputs accept (the AI SDK drops length and range bounds
// from the schema it sends there and checks them itself): types, enums, required.
const PersonForAnthropic = z.object({
  name: z.enum(["Ann", "Bob", "Eve"]),
  age: z.number().int(),
  pet: z.enum(["cat", "dog", "none"]),
});

// Records each request; a forced call of a non-strict tool gets the rest of the call.
const sent = [];
const forcing = async (url, init) => {
  if (init?.body && typeof init.body === "string") {
    const body = JSON.parse(init.body);
    sent.push({ url: String(url), body });
    const choice = body.tool_choice;
    const forcedName =
      choice?.type === "tool" ? choice.name :
      choice?.type === "function" ? (choice.function?.name ?? choice.name) : undefined;
    const tools = body.tools ?? [];
    // "any" / "required" with one tool: the call of that tool.
    const anyCall = (choice?.type === "any" || choice === "required") && tools.length === 1;
    const name = forcedName ?? (anyCall ? (tools[0].name ?? tools[0].function?.name) : undefined);
    const tool = tools.find((t) => (t.name ?? t.function?.name) === name);
    const strict = tool?.strict ?? tool?.function?.strict;
    if (name && !strict && body.test_forced_reply === undefined) {
      // The server's opener ends after the name for a named choice
      // (`<tool_call>\n{"name": "NAME"`), before the call for any / required.
      const args = `"arguments": ${JSON.stringify(forcedArgs)}}\n</tool_call>`;
      body.test_forced_reply = forcedName ? `, ${args}` : `{"name": "${name}", ${args}`;
      init = { ...init, body: JSON.stringify(body) };
    }
  }
  return fetch(url, init);
};
const lastSent = () => sent[sent.length - 1].body;

function checkPerson(p, what) {
  const r = Person.safeParse(p);
  assert.ok(r.success, `${what}: ${JSON.stringify(p)} does not satisfy the schema`);
}

// ---- AI SDK on OpenAI providers: a grammar constrains the reply ----
const openai = createOpenAI({ baseURL: `${root}/v1`, apiKey: "unused", fetch: forcing });
for (const [what, m] of [["openai() (Responses)", openai(model)], ["openai.chat()", openai.chat(model)]]) {
  for (const seed of [1, 2]) {
    const { object } = await generateObject({ model: m, schema: Person, prompt: "Describe a person.", seed,
                                              maxRetries: 0 });
    checkPerson(object, what);
  }
}
assert.ok(sent.some((s) => s.url.endsWith("/responses") && s.body.text?.format?.type === "json_schema"));
assert.ok(sent.some((s) => s.url.endsWith("/chat/completions") && s.body.response_format?.type === "json_schema"));

// ---- AI SDK on @ai-sdk/anthropic: output_config.format, then the forced json tool ----
const anthropic = createAnthropic({ baseURL: `${root}/v1`, apiKey: "unused", fetch: forcing });
{
  const { object } = await generateObject({
    model: anthropic(model), schema: PersonForAnthropic, prompt: "Describe a person.", maxRetries: 0,
    providerOptions: { anthropic: { structuredOutputMode: "outputFormat" } },
  });
  assert.ok(PersonForAnthropic.safeParse(object).success, JSON.stringify(object));
  assert.equal(lastSent().output_config?.format?.type, "json_schema", JSON.stringify(lastSent()));
}
{
  const { object } = await generateObject({
    model: anthropic(model), schema: Person, prompt: "Describe a person.", maxRetries: 0,
    providerOptions: { anthropic: { structuredOutputMode: "jsonTool" } },
  });
  assert.deepEqual(object, forcedArgs);
  assert.ok(["tool", "any"].includes(lastSent().tool_choice?.type), JSON.stringify(lastSent()));
}

// ---- LangChain withStructuredOutput ----
const chatOpenAI = new ChatOpenAI({ model, apiKey: "unused", maxRetries: 0,
                                    configuration: { baseURL: `${root}/v1`, fetch: forcing } });
{
  const person = await chatOpenAI.withStructuredOutput(Person, { name: "person", method: "jsonSchema" })
    .invoke("Describe a person.");
  checkPerson(person, "ChatOpenAI jsonSchema");
  assert.equal(lastSent().response_format?.type, "json_schema", JSON.stringify(lastSent()));
}
{
  const person = await chatOpenAI.withStructuredOutput(Person, { name: "person", method: "functionCalling" })
    .invoke("Describe a person.");
  checkPerson(person, "ChatOpenAI functionCalling");
  assert.ok(lastSent().tool_choice, JSON.stringify(lastSent()));
}
const chatAnthropic = new ChatAnthropic({ model, apiKey: "unused", maxRetries: 0, anthropicApiUrl: root,
                                          clientOptions: { fetch: forcing } });
{
  const person = await chatAnthropic.withStructuredOutput(Person, { name: "person" }).invoke("Describe a person.");
  assert.deepEqual(person, forcedArgs);
  assert.equal(lastSent().tool_choice?.type, "tool", JSON.stringify(lastSent()));
}

console.log(`structured output: ${sent.length} requests, all objects valid`);
