// client.mjs: drives an MCP server with the official TypeScript SDK client and prints, as JSON,
// every message the client received, in order. The Go tests run it against a server directly
// and through `aegis mcp` and compare the two transcripts.
//
//   node client.mjs stdio COMMAND ARGS...     start the server (or aegis) over stdio
//   node client.mjs http URL                  connect over Streamable HTTP
//
// The scenario comes from $MCP_SCENARIO: "everything" (every feature of server-everything),
// "filesystem" (server-filesystem under $MCP_ROOT), or "calls" (list the tools, then call
// each entry of $MCP_CALLS, a JSON array of {name, arguments}).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema, LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
const received = [];
const steps = [];

function tap(transport) {
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get() { return handler && ((m, extra) => { received.push(m); handler(m, extra); }); },
    set(h) { handler = h; },
  });
  return transport;
}

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit", env: { ...process.env } });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else {
  console.error("usage: client.mjs stdio COMMAND ARGS... | http URL");
  process.exit(2);
}
tap(transport);

const client = new Client({ name: "aegis-test-client", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } });
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  model: "test-model", role: "assistant", content: { type: "text", text: "a sampled answer" }, stopReason: "endTurn",
}));
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "decline" }));
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///tmp/aegis-root", name: "root" }] }));
let updates = 0, logs = 0;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, () => { updates++; });
client.setNotificationHandler(LoggingMessageNotificationSchema, () => { logs++; });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(pred, ms) { const end = Date.now() + ms; while (!pred() && Date.now() < end) await sleep(50); return pred(); }

// step runs one operation and records its outcome (the value, or the error the client saw).
async function step(name, f) {
  try { steps.push({ step: name, ok: await f() }); }
  catch (e) { steps.push({ step: name, error: String(e?.code ?? "") + " " + String(e?.message ?? e) }); }
}

async function everything() {
  await step("tools/list", () => client.listTools());
  await step("echo", () => client.callTool({ name: "echo", arguments: { message: "hello through the proxy" } }));
  await step("get-sum", () => client.callTool({ name: "get-sum", arguments: { a: 2, b: 3 } }));
  await step("get-tiny-image", () => client.callTool({ name: "get-tiny-image", arguments: {} }));
  await step("get-annotated-message", () => client.callTool({ name: "get-annotated-message", arguments: { messageType: "error", includeImage: true } }));
  await step("get-structured-content", () => client.callTool({ name: "get-structured-content", arguments: { location: "New York" } }));
  await step("get-resource-links", () => client.callTool({ name: "get-resource-links", arguments: { count: 3 } }));
  await step("get-resource-reference", () => client.callTool({ name: "get-resource-reference", arguments: { resourceType: "text", resourceId: 1 } }));
  let progress = 0;
  await step("progress", () => client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
    undefined, { onprogress: () => { progress++; } }));
  steps.push({ step: "progress notifications arrived", ok: progress > 0 });
  await step("cancellation", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort("stop"), 300);
    return client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 5, steps: 5 } }, undefined, { signal: ac.signal });
  });
  await step("sampling", () => client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "say hi", maxTokens: 10 } }));
  await step("elicitation", () => client.callTool({ name: "trigger-elicitation-request", arguments: {} }));
  await step("roots", () => client.callTool({ name: "get-roots-list", arguments: {} }));
  await step("resources/list", () => client.listResources());
  await step("resources/templates/list", () => client.listResourceTemplates());
  await step("resources/read text", () => client.readResource({ uri: "demo://resource/dynamic/text/1" }));
  await step("resources/read blob", () => client.readResource({ uri: "demo://resource/dynamic/blob/2" }));
  const uri = "demo://resource/dynamic/text/1";
  await step("resources/subscribe", () => client.subscribeResource({ uri }));
  await step("subscriber updates on", () => client.callTool({ name: "toggle-subscriber-updates", arguments: {} }));
  await step("an update arrived", () => until(() => updates > 0, 15000));
  await step("subscriber updates off", () => client.callTool({ name: "toggle-subscriber-updates", arguments: {} }));
  await step("resources/unsubscribe", () => client.unsubscribeResource({ uri }));
  await step("logging/setLevel", () => client.setLoggingLevel("debug"));
  await step("logging on", () => client.callTool({ name: "toggle-simulated-logging", arguments: {} }));
  await step("a log message arrived", () => until(() => logs > 0, 15000));
  await step("logging off", () => client.callTool({ name: "toggle-simulated-logging", arguments: {} }));
  await step("prompts/list", () => client.listPrompts());
  await step("prompts/get simple", () => client.getPrompt({ name: "simple-prompt" }));
  await step("prompts/get args", () => client.getPrompt({ name: "args-prompt", arguments: { city: "Paris", state: "TX" } }));
  await step("completion/complete", () => client.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "department", value: "E" } }));
  await step("ping", () => client.ping());
  await step("unknown method", () => client.request({ method: "aegis/no-such-method", params: { x: 1 } }, CreateMessageRequestSchema.shape.params.optional().or(Object)));
}

async function filesystem() {
  const root = process.env.MCP_ROOT;
  await step("tools/list", () => client.listTools());
  await step("list_allowed_directories", () => client.callTool({ name: "list_allowed_directories", arguments: {} }));
  await step("write_file", () => client.callTool({ name: "write_file", arguments: { path: root + "/note.txt", content: "a note\nsecond line\n" } }));
  await step("read_text_file", () => client.callTool({ name: "read_text_file", arguments: { path: root + "/note.txt" } }));
  await step("list_directory", () => client.callTool({ name: "list_directory", arguments: { path: root } }));
  await step("search_files", () => client.callTool({ name: "search_files", arguments: { path: root, pattern: "note" } }));
  await step("outside the root", () => client.callTool({ name: "read_text_file", arguments: { path: "/etc/hostname" } }));
}

async function calls() {
  await step("tools/list", () => client.listTools());
  for (const c of JSON.parse(process.env.MCP_CALLS || "[]")) {
    await step(c.name, () => client.callTool(c));
  }
}

const scenario = process.env.MCP_SCENARIO || "everything";
const timer = setTimeout(() => { console.error("client.mjs: timed out"); process.exit(3); }, 120000);
try {
  await client.connect(transport);
  await { everything, filesystem, calls }[scenario]();
} catch (e) {
  steps.push({ step: "fatal", error: String(e?.message ?? e) });
}
clearTimeout(timer);
await client.close().catch(() => {});
process.stdout.write(JSON.stringify({ received, steps }) + "\n");
process.exit(0);
