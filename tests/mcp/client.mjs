// A real MCP client (the official TypeScript SDK) driving `mesh-memory mcp`.
//
//   node client.mjs stdio <mesh-memory binary> <database url> <agent> <conversation> <speaker> '<ops>'
//   node client.mjs stdio <mesh-memory binary> <database url> - - - '<ops>'   (bound by MESH_MCP_TOKEN)
//
// The stdio server gets the SDK's default environment plus every MESH_* variable of this process
// (MESH_MCP_TOKEN, MESH_AUDIT_DIGEST_KEY, MESH_OPERATOR_ROLE / _PASSWORD, MESH_EMBEDDER), as a
// host passes its configuration's "env" block.
//   node client.mjs http <endpoint url> <bearer token> '<ops>'
//   node client.mjs probe <endpoint url> <bearer token or ->      (raw HTTP: prints the status code)
//
// Ops run in order; each is {"op": "tools"} | {"op": "call", "name", "args"} | {"op": "prompt",
// "name", "args"}. In args, "$ENTRY" stands for the entry id of the latest committed write seen
// (as the server showed it), "$RANDOM" for a made-up id. Prints one JSON line: what the client
// saw for every op, for tests/mcp_stdio.rs and tests/mcp_http.rs to compare with the database.
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);

if (mode === "probe") {
  // What a client without a valid token gets: the status of an initialize request.
  const [endpoint, token] = rest;
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (token !== "-") headers.authorization = `Bearer ${token}`;
  const response = await fetch(endpoint, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
    }),
  });
  console.log(JSON.stringify({ status: response.status }));
  process.exit(0);
}

let transport;
let opsJson;
if (mode === "stdio") {
  const [binary, url, agent, conversation, speaker, ops] = rest;
  opsJson = ops;
  const binding = agent === "-" ? [] : ["--agent", agent, "--conversation", conversation, "--as", speaker];
  const mesh = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith("MESH_")));
  transport = new StdioClientTransport({
    command: binary,
    args: ["--database-url", url, "mcp", ...binding],
    env: { ...getDefaultEnvironment(), ...mesh },
    stderr: "inherit",
  });
} else if (mode === "http") {
  const [endpoint, token, ops] = rest;
  opsJson = ops;
  transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
} else {
  throw new Error(`unknown mode ${mode}`);
}
const ops = JSON.parse(opsJson);
const client = new Client({ name: "mesh-memory-test-client", version: "1.0.0" });
await client.connect(transport);

let latest = { entry_id: null };
const substitute = (value) => {
  if (typeof value === "string") {
    return value
      .replaceAll("$ENTRY", latest.entry_id ?? "")
      .replaceAll("$RANDOM", randomUUID());
  }
  if (Array.isArray(value)) return value.map(substitute);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
  }
  return value;
};

const seen = [];
for (const op of ops) {
  if (op.op === "tools") {
    const { tools } = await client.listTools();
    seen.push({ op: "tools", names: tools.map((t) => t.name).sort() });
  } else if (op.op === "call") {
    const result = await client.callTool({ name: op.name, arguments: substitute(op.args ?? {}) });
    const text = result.content.map((c) => c.text ?? "").join("");
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    if (json && json.status === "committed") {
      latest = { entry_id: json.entry_id };
    }
    seen.push({ op: "call", name: op.name, isError: result.isError === true, text, json });
  } else if (op.op === "prompt") {
    const prompt = await client.getPrompt({ name: op.name, arguments: substitute(op.args ?? {}) });
    const text = prompt.messages.map((m) => m.content.text ?? "").join("\n");
    seen.push({ op: "prompt", description: prompt.description ?? "", text });
  }
}
await client.close();
console.log(JSON.stringify(seen));
