// A small logging proxy between a coding harness and `promptcache serve` for
// scripts/agents-e2e.sh. Forwards every request to UPSTREAM; on the first generation
// request that offers tools it adds `test_forced_reply` (the server runs with
// --test-hooks) so that the random model makes one tool call in the template's format
// (FORCED_CALL); it prints one line per request: method, path, status, prompt tokens and
// cached tokens, read from the response (whole or streamed).
import http from "node:http";

const upstream = new URL(process.env.UPSTREAM);
const forced = (process.env.FORCED_CALL ?? "").replaceAll("\\n", "\n");  // "\n" in the variable: a newline
let forcedSent = false;
let n = 0;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body = Buffer.concat(chunks);
    if (req.method === "POST" && forced && !forcedSent && body.length) {
      try {
        const j = JSON.parse(body.toString());
        if (Array.isArray(j.tools) && j.tools.length > 0) {
          j.test_forced_reply = forced;
          forcedSent = true;
          body = Buffer.from(JSON.stringify(j));
        }
      } catch { /* not JSON: forwarded as is */ }
    }
    const headers = { ...req.headers, host: upstream.host, "content-length": body.length };
    const up = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
      (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        let text = "";
        ur.on("data", (c) => { text += c.toString(); res.write(c); });
        ur.on("end", () => {
          res.end();
          const num = (k) => { const m = [...text.matchAll(new RegExp(`"${k}":(\\d+)`, "g"))]; return m.length ? m.at(-1)[1] : "-"; };
          console.log(`#${++n} ${req.method} ${req.url} -> ${ur.statusCode}` +
                      ` prompt=${num("prompt_tokens") !== "-" ? num("prompt_tokens") : num("input_tokens")}` +
                      ` cached=${num("cached_tokens")} cache_read=${num("cache_read_input_tokens")}`);
        });
      });
    up.on("error", (e) => { res.writeHead(502); res.end(String(e)); console.log(`#${++n} ${req.url} -> proxy error ${e}`); });
    up.end(body);
  });
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => console.log(`proxy on ${server.address().port}`));
