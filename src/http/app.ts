// The Hono app: body limit before parsing, authentication, the route groups, and the single
// error boundary that turns ApiProblem (and anything unexpected) into problem+json.
import { freezeRoutes } from "./freezes-routes.ts";
import { delegationRoutes } from "./delegations-routes.ts";
import { tripwireRoutes } from "./tripwires-routes.ts";
import { grantRoutes } from "./grants-routes.ts";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { consoleApp } from "../console/app.tsx";
import { consoleOrigin } from "../config.ts";
import { adminRoutes } from "./admin-routes.ts";
import { authenticate, type AppEnv } from "./auth.ts";
import { eventRoutes } from "./events-routes.ts";
import { indexRoutes } from "./index-routes.ts";
import { docsRoutes } from "./openapi.ts";
import { approvalRoutes, operationRoutes, unknownOutcomeRoutes } from "./operations-routes.ts";
import { ApiProblem, problemResponse } from "./problem.ts";
import { MAX_BODY_BYTES } from "./request.ts";
import { runRoutes } from "./runs-routes.ts";
import { secretRoutes } from "./secrets-routes.ts";
import { toolRoutes } from "./tools-routes.ts";
import { webhookRoutes } from "./webhooks-routes.ts";
import { mcpRoutes } from "./mcp-routes.ts";
import { limitRoutes } from "./limits-routes.ts";
import { quotaRoutes } from "./quotas-routes.ts";
import { policyRoutes } from "./policies-routes.ts";
import { publicReceiptRoutes, receiptRoutes } from "./receipts-routes.ts";
import { connectionRoutes, oauthCallback, oauthProviderRoutes } from "./oauth-routes.ts";

export const app = new Hono<AppEnv>();

app.get("/healthz", (c) => c.json({ ok: true }));
// The front door: where people and programs go from here (a browser gets a page, anything else JSON).
app.get("/", (c) => {
  const origin = consoleOrigin(c.env, c.req.url);
  const links = {
    console: `${origin}/console`,
    docs: `${origin}/docs`,
    openapi: `${origin}/openapi.json`,
  };
  if (!(c.req.header("Accept") ?? "").includes("text/html"))
    return c.json({ name: "toolgate", ...links });
  return c.html(`<!doctype html><html><head><meta charset="utf-8"><title>toolgate</title></head>
<body style="font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto"><h1>toolgate</h1>
<p>A durable tool runner for AI agents.</p><ul>
<li><a href="${links.console}">Console</a>: approvals, unknown outcomes, runs (sign in with an API key)</li>
<li><a href="${links.docs}">API reference</a> (<a href="${links.openapi}">OpenAPI 3.1</a>)</li></ul></body></html>`);
});
app.route("/", docsRoutes);
// Public, unauthenticated: a tenant's receipt verification keys (issue 37), nothing private.
app.route("/public", publicReceiptRoutes);
// The OAuth redirect target (issue 36): public, the state names whose connection it completes.
app.get("/oauth/callback", oauthCallback);
const limitBodies = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () =>
    problemResponse({
      code: "payload_too_large",
      detail: `bodies are limited to ${MAX_BODY_BYTES} bytes`,
    }),
});
app.use("/v1/*", limitBodies);
app.use("/mcp", limitBodies);
app.use("/v1/*", authenticate);
app.route("/v1/admin", adminRoutes);
app.route("/v1/tools", toolRoutes);
app.route("/v1/secrets", secretRoutes);
app.route("/v1/webhooks", webhookRoutes);
// The tenant index's lists and overview (GET /v1/runs, /v1/operations, /v1/overview), before the
// groups whose other routes share those prefixes.
app.route("/v1", indexRoutes);
app.route("/v1/runs", runRoutes);
app.route("/v1/operations", operationRoutes);
app.route("/v1/approvals", approvalRoutes);
app.route("/v1/unknown-outcomes", unknownOutcomeRoutes);
app.route("/v1/events", eventRoutes);
app.route("/v1/limits", limitRoutes);
app.route("/v1/policies", policyRoutes);
app.route("/v1/quotas", quotaRoutes);
app.route("/v1/freezes", freezeRoutes);
app.route("/v1/delegations", delegationRoutes);
app.route("/v1/tripwires", tripwireRoutes);
app.route("/v1/grants", grantRoutes);
app.route("/v1/receipts", receiptRoutes);
app.route("/v1/oauth-providers", oauthProviderRoutes);
app.route("/v1/connections", connectionRoutes);
// People, not agents: its own session cookie, CSRF tokens and HTML error pages (src/console/app.tsx).
app.route("/console", consoleApp);
// Agents over MCP: Host/Origin checks and the run token in front (src/http/mcp-routes.ts).
app.route("/mcp", mcpRoutes);

app.notFound(() => problemResponse({ code: "not_found", detail: "no such route" }));
app.onError((error) => {
  if (error instanceof ApiProblem) return problemResponse(error.error);
  console.error("unhandled error", error);
  return problemResponse({ code: "internal", detail: "internal error" });
});
