// /openapi.json and /docs, generated from the same zod schemas the routes parse with.
import { PutDelegation } from "./delegations-routes.ts";
import { Hono } from "hono";
import { z } from "zod";
import { ToolgateEvent } from "../domain/journal/events.ts";
import { NativeTurnBody } from "../providers/native.ts";
import { Manifest } from "../tools/manifest/schema.ts";
import { VerifyTool } from "../tools/verify.ts";
import type { AppEnv } from "./auth.ts";
import { PutPolicies } from "./policies-routes.ts";
import { PutQuota } from "./quotas-routes.ts";
import { PostConnection, PutOAuthProvider } from "./oauth-routes.ts";
import { FreezeBody } from "../domain/freeze.ts";
import { TripwireBody } from "../domain/tripwire.ts";
import { GrantBody } from "../domain/grant.ts";
import { SignedReceiptSchema } from "../domain/receipt.ts";
import { OperationReceipt, ReceiptBundle, ReceiptJwks } from "./receipts-routes.ts";
import {
  Approve,
  CreateRun,
  CreateTenant,
  Envelope,
  IssueKey,
  TenantSettings,
  PatchRun,
  Problem,
  PutSecret,
  Reject,
  Resolve,
  ApprovalBatch,
  Compensate,
  CancelRun,
  ApproveRollbackPlan,
  SecretRecord,
  TurnResponse,
  PutWebhook,
  Redeliver,
  WebhookDelivery,
  WebhookRecord,
} from "./schemas.ts";

type Route = {
  method: string;
  path: string;
  summary: string;
  auth: string;
  body?: z.ZodType;
  response?: z.ZodType;
  query?: string[];
};

export const ROUTES: Route[] = [
  {
    method: "post",
    path: "/v1/admin/tenants",
    summary:
      'Create a tenant; with "jurisdiction" ("eu" or "fedramp") every object of it is created in that jurisdiction and its events go only through that jurisdiction\'s queues (anything else, or a jurisdiction whose queues this deployment does not bind: 422 unsupported_jurisdiction) → { tenant_id, name, jurisdiction }',
    auth: "admin token",
    body: CreateTenant,
  },
  {
    method: "post",
    path: "/v1/admin/tenants/{tenant_id}/keys",
    summary: "Issue an API key (shown once)",
    auth: "admin token",
    body: IssueKey,
  },
  {
    method: "delete",
    path: "/v1/admin/tenants/{tenant_id}/keys/{key_id}",
    summary: "Revoke an API key",
    auth: "admin token",
  },
  {
    method: "put",
    path: "/v1/admin/tenants/{tenant_id}/settings",
    summary:
      "The tenant's settings: { grant_four_eyes } — standing grants are made proposed and another person confirms them (POST /v1/grants/{id}/confirm). The admin's, so no tenant key can switch off a check it is subject to → the settings",
    auth: "admin token",
    body: TenantSettings,
  },
  {
    method: "get",
    path: "/v1/admin/tenants/{tenant_id}/settings",
    summary: "The tenant's settings ({ grant_four_eyes })",
    auth: "admin token",
  },
  {
    method: "put",
    path: "/v1/tools/{name}",
    summary:
      "Register or replace an HTTP tool manifest → the record and warnings ([], a context_required: the run context fields its runs must carry, and with ?force=1 a policy_set_invalid); a change that would make the tenant's Cedar policy set fail validation → 422 tool_breaks_policy_set with Cedar's message, nothing stored, unless ?force=1 (stored, and the set marked invalid: every call refused until the set is PUT again)",
    auth: "tools:write",
    body: Manifest,
    query: ["force"],
  },
  {
    method: "get",
    path: "/v1/tools",
    summary: "List tool manifests, each with its verification answer (without the evidence)",
    auth: "tools:write",
  },
  {
    method: "get",
    path: "/v1/tools/{name}",
    summary: "Read a tool manifest and its verification answer with the evidence",
    auth: "tools:write",
  },
  {
    method: "delete",
    path: "/v1/tools/{name}",
    summary:
      "Delete a tool manifest; one the tenant's Cedar policy set needs → 422 tool_breaks_policy_set, unless ?force=1 (deleted, and the set marked invalid: 200 { deleted, warnings: [policy_set_invalid] }; otherwise 204)",
    auth: "tools:write",
    query: ["force"],
  },
  {
    method: "post",
    path: "/v1/tools/{name}/verify",
    summary:
      "Check that the upstream deduplicates by the tool's idempotency header (sends test requests) → the stored verdict: status verified | verified_sandbox_only (a base_url sandbox: runs treat it as unverified) | failed | unverified, counts_for_runs, summary; a tool whose approval rule would ask needs approvals:decide too, unless base_url names a sandbox",
    auth: "tools:write",
    body: VerifyTool,
  },
  {
    method: "put",
    path: "/v1/secrets/{name}",
    summary:
      "Register or rotate a tenant secret (write-only; referenced by tools as {secret:NAME})",
    auth: "secrets:write",
    body: PutSecret,
    response: SecretRecord,
  },
  {
    method: "get",
    path: "/v1/secrets",
    summary: "List secret names, fingerprints and times (never values)",
    auth: "secrets:write",
  },
  {
    method: "delete",
    path: "/v1/secrets/{name}",
    summary: "Delete a tenant secret",
    auth: "secrets:write",
  },
  {
    method: "put",
    path: "/v1/oauth-providers/{id}",
    summary:
      "Register or change an OAuth provider tools act for users through (issue 36): { issuer (RFC 8414 discovery) | authorization_endpoint + token_endpoint, client_id, client_secret (sealed, write-only), scopes?, pkce? (default true), token_endpoint_auth? } → the provider with its discovered endpoints and the secret's fingerprint (422 oauth_provider_invalid: discovery failed or an endpoint is not allowed; nothing stored)",
    auth: "secrets:write",
    body: PutOAuthProvider,
  },
  {
    method: "get",
    path: "/v1/oauth-providers",
    summary: "The tenant's OAuth providers → { providers } (client secrets by fingerprint only)",
    auth: "secrets:write",
  },
  {
    method: "get",
    path: "/v1/oauth-providers/{id}",
    summary: "One OAuth provider (404 unknown_oauth_provider)",
    auth: "secrets:write",
  },
  {
    method: "delete",
    path: "/v1/oauth-providers/{id}",
    summary:
      "Remove an OAuth provider → 204 (409 oauth_provider_in_use naming the tools that act as the user with it; ?force=1 deletes anyway → 200 { deleted, tools_without_provider })",
    auth: "secrets:write",
  },
  {
    method: "post",
    path: "/v1/connections",
    summary:
      "Start connecting an end user to a provider: { provider, user } → { authorization_url } for that user to open (state bound to tenant, user and provider, single-use; PKCE); the provider redirects to /oauth/callback",
    auth: "runs:write",
    body: PostConnection,
  },
  {
    method: "get",
    path: "/v1/connections",
    summary:
      "An end user's connections (?user=) → { connections: [{ provider, health: connected | expiring | needs_consent, scopes, expires_at, connected_at, reason }] } (never a token)",
    auth: "runs:write",
    query: ["user"],
  },
  {
    method: "delete",
    path: "/v1/connections/{provider}",
    summary: "Disconnect an end user (?user=) from a provider: the tokens are dropped → 204",
    auth: "runs:write",
    query: ["user"],
  },
  {
    method: "get",
    path: "/oauth/callback",
    summary:
      "The OAuth redirect target (register <TOOLGATE_CONSOLE_URL>/oauth/callback with the provider): completes a connection and wakes the calls waiting for it; a tampered or replayed state is 400 connection_state_invalid",
    auth: "none",
    query: ["code", "state"],
  },
  {
    method: "put",
    path: "/v1/webhooks/{id}",
    summary:
      "Create or change a webhook endpoint (Standard Webhooks or Slack); the whsec_ secret is in the creating answer only; a URL failing the tool URL rules is 422 webhook_url_not_allowed",
    auth: "webhooks:write",
    body: PutWebhook,
    response: WebhookRecord,
  },
  {
    method: "get",
    path: "/v1/webhooks",
    summary: "List webhook endpoints and their state (never a secret)",
    auth: "webhooks:read or webhooks:write",
  },
  {
    method: "delete",
    path: "/v1/webhooks/{id}",
    summary: "Delete a webhook endpoint and its delivery log",
    auth: "webhooks:write",
  },
  {
    method: "post",
    path: "/v1/webhooks/{id}/rotate-secret",
    summary: "Replace the endpoint's signing secret → the new whsec_ secret, shown once",
    auth: "webhooks:write",
  },
  {
    method: "get",
    path: "/v1/webhooks/{id}/deliveries",
    summary: "Recent delivery attempts, newest first (the last 100 are kept)",
    auth: "webhooks:read or webhooks:write",
    response: z.object({ webhook_id: z.string(), deliveries: z.array(WebhookDelivery) }),
    query: ["limit"],
  },
  {
    method: "post",
    path: "/v1/webhooks/{id}/redeliver",
    summary:
      "Send an event again now (same webhook-id; one attempt, not retried): one sent to this endpoint or a stored event it subscribes to, for the retention period; a delivered one cancels its scheduled retries → the attempt's outcome",
    auth: "webhooks:write",
    body: Redeliver,
  },
  {
    method: "post",
    path: "/v1/webhooks/{id}/test",
    summary:
      "Send a signed webhook.test event to this endpoint now, whatever its events filter (logged like any delivery) → the attempt's outcome",
    auth: "webhooks:write",
  },
  {
    method: "post",
    path: "/v1/runs",
    summary:
      "Create a run → run_id, run_token, tools, warnings (idempotency_unverified, context_missing; [] when none) (with notify.url: notify.webhook_id and its whsec_ secret, in this answer only)",
    auth: "runs:write",
    body: CreateRun,
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}",
    summary: "Read a run (scopes, tools, budgets, usage); 410 run_pruned after retention",
    auth: "runs:read or run token",
  },
  {
    method: "patch",
    path: "/v1/runs/{run_id}",
    summary:
      "Change the user's scopes and/or the offered tools → the run and its warnings, as at creation",
    auth: "runs:write",
    body: PatchRun,
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/cancel",
    summary:
      "Cancel the run. With { rollback: true } (also needs operations:compensate) the writes this run created (not ones it joined or conflicted with) are then compensated one at a time, newest first; `rollback` reports each step (503 unavailable: cancelled, but the rollback could not be planned yet; ask again)",
    auth: "runs:write",
    body: CancelRun,
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/rollback",
    summary:
      "A running rollback's plan → { state, items: [{ operation_id, tool, compensation_tool, compensation_id, input_hash, policy_version, arguments, four_eyes, step_up }], approvals }: each compensation still to come, with the hash it freezes",
    auth: "approvals:decide",
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/rollback/approve",
    summary:
      "Approve the rollback's plan at once: { items: [{ input_hash, policy_version }] } exactly as the plan lists them now (409 approval_mismatch otherwise, e.g. a compensating tool PUT again since it was read); each compensation frozen with a listed hash and tool version is then approved as if this person approved it alone (four eyes, routes, quorum); another hash asks a person",
    auth: "approvals:decide",
    body: ApproveRollbackPlan,
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/tools",
    summary:
      "Tool definitions for the model, and warnings: tools whose idempotency is not verified, context fields an offered tool reads that the run lacks",
    auth: "runs:read or run token",
    query: ["format"],
  },
  {
    method: "post",
    path: "/v1/runs/{run_id}/turns",
    summary:
      "Post a model response's tool calls (header Prefer: wait=N; the default 10 s ends once only a person's decision is left) → 200 settled | 202 pending",
    auth: "runs:write or run token",
    body: NativeTurnBody,
    response: TurnResponse,
    query: ["format"],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/turns/{turn_id}",
    summary: "Read or long-poll a turn",
    auth: "runs:read or run token",
    response: TurnResponse,
    query: ["wait"],
  },
  {
    method: "get",
    path: "/v1/runs/{run_id}/trace",
    summary:
      "Every transition of the run and its operations, hash-chained and redacted (format=json), or OTLP/JSON resourceSpans (format=otlp)",
    auth: "traces:read",
    query: ["format"],
  },
  {
    method: "get",
    path: "/v1/operations/{operation_id}",
    summary:
      "Read or long-poll one operation (`settling`: {next_try_at, until} while an unknown outcome settles late by itself; `shadow` and `would_have_sent`: a shadow run's write and the production request it would have sent, secrets by name; `payment`: an x402 tool's accepted payment, its id and the merchant's decoded settlement); verify=1 checks its trace's hash chain; 410 operation_pruned after retention",
    auth: "runs:read",
    query: ["wait", "verify"],
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/cancel",
    summary: "Cancel one operation",
    auth: "runs:write",
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/approve",
    summary:
      "Approve a call awaiting approval (decided once; four eyes by default). The decider: the person a Cf-Access-Jwt-Assertion names when Cloudflare Access is configured (verified; a bad token is 401 access_denied), else the key's name",
    auth: "approvals:decide",
    body: Approve,
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/reject",
    summary: "Reject a call awaiting approval",
    auth: "approvals:decide",
    body: Reject,
  },
  {
    method: "get",
    path: "/v1/approvals",
    summary:
      "The approvals inbox, newest first (state=pending|decided, cursor, limit); a pending call of a tool acting as the user names its connection with its health now (credential: { provider, user, health, must_reconnect })",
    auth: "approvals:decide",
    query: ["state", "cursor", "limit"],
  },
  {
    method: "post",
    path: "/v1/approvals/batch",
    summary:
      "Decide up to 100 calls at once, each [{ operation_id, input_hash, approval_hash?, decision: approve|reject, reason }] exactly as if alone → { decided_by, decided_via, items: [{ operation_id, result: decided, state, phase } | { operation_id, result: voted, votes, needed } (a routed approval: the vote counted, more are needed) | { operation_id, result: skipped, reason: input_hash_changed|policy_version_changed|approval_hash_changed|expired|already_decided|cancelled|self_approval|not_an_approver|step_up_required|not_awaiting_approval|not_found|unavailable, detail }] } in order",
    auth: "approvals:decide",
    body: ApprovalBatch,
  },
  {
    method: "get",
    path: "/v1/approvals/{operation_id}",
    summary:
      "One approval request as the approver must see it: the frozen arguments and target unredacted, `hidden` naming the fields traces redact; a tool acting as the user names its connection with its health now (credential: { provider, user, scopes, health, must_reconnect })",
    auth: "approvals:decide",
  },
  {
    method: "get",
    path: "/v1/unknown-outcomes",
    summary:
      "Unknown outcomes for people, oldest first: those waiting for a person's verdict (settling: null) and those settling late by itself (settling: {next_try_at, until}; a verdict stops it)",
    auth: "operations:resolve",
    query: ["limit"],
  },
  {
    method: "get",
    path: "/v1/events",
    summary:
      "The tenant's events (approval.*, operation.outcome_unknown, operation.recorded, turn.settled, run.budget_exhausted, lock.waiting_long, credential.required, endpoint.failing), redacted, oldest first after `since` (an event id, or an ISO time) → { events, next_cursor, has_more }",
    auth: "events:read",
    query: ["since", "type", "limit"],
  },
  {
    method: "put",
    path: "/v1/policies",
    summary:
      "Store the tenant's Cedar policy set, validated against the schema generated from its tools (principal User with id, scopes and attribute tags; one action per tool; resource Target; context.arguments and context.run) → 422 invalid_policy with Cedar's message",
    auth: "policies:write",
    body: PutPolicies,
  },
  {
    method: "get",
    path: "/v1/policies",
    summary:
      "The tenant's Cedar policy set with its version, the generated schema and `invalid` ({ reason, since } when a forced tool change broke it, else null)",
    auth: "policies:write",
  },
  {
    method: "delete",
    path: "/v1/policies",
    summary:
      "Remove the tenant's Cedar policy set: calls are no longer Cedar-gated → 204 (404: none)",
    auth: "policies:write",
  },
  {
    method: "put",
    path: "/v1/quotas/{id}",
    summary:
      "Define a quota: { scope: { origin } (every call of the tenant to that upstream origin) | { tool } (each user's calls of that tool), rate?: { limit, window_ms } (at most limit first attempts begun in any window), burst?, concurrency? }. A first attempt over it waits inside its operation (pending, code rate_limited, \"next slot in ~N s\"; quota_exhausted while the upstream's own quota is used up) and spends no attempt → 201/200 (422 quota_conflict: another id defines the same scope otherwise)",
    auth: "tools:write",
    body: PutQuota,
  },
  {
    method: "get",
    path: "/v1/quotas",
    summary: "The tenant's quotas → { quotas: [{ id, definition, updated_at }] }",
    auth: "tools:write",
  },
  {
    method: "delete",
    path: "/v1/quotas/{id}",
    summary:
      "Remove a quota: calls started after it reaches their run (within 30 s) no longer wait for it → 204 (404: none)",
    auth: "tools:write",
  },
  {
    method: "put",
    path: "/v1/delegations",
    summary:
      "Delegate your votes on routed approvals to another person for a period (issue 35): { to, starts_at?, ends_at } (at most 90 days; you are the verified decider) → the delegation; replaces yours",
    auth: "approvals:decide",
    body: PutDelegation,
  },
  {
    method: "delete",
    path: "/v1/delegations",
    summary: "End your delegation → { from, ended }",
    auth: "approvals:decide",
  },
  {
    method: "get",
    path: "/v1/delegations",
    summary: "The tenant's delegations (from, to, starts_at_ms, ends_at_ms)",
    auth: "approvals:decide",
  },
  {
    method: "put",
    path: "/v1/freezes/{id}",
    summary:
      'Freeze calls now (issue 34): scope { tenant: true } | { tool } | { origin } | { user } | { run }; mode "hold" (held calls wait, pending/frozen, and continue after the lift, a batch at a time through the retry budget) or "refuse" (calls not yet sent end rejected/frozen); writes_only lets reads through; expires_at must be in the future (422 freeze_expired) → { freeze, runs_told, runs_pending }',
    auth: "freezes:write",
    body: FreezeBody,
  },
  {
    method: "delete",
    path: "/v1/freezes/{id}",
    summary:
      "Lift a freeze: held calls continue, a batch at a time → { freeze, runs_told, runs_pending } (404: none in force)",
    auth: "freezes:write",
  },
  {
    method: "get",
    path: "/v1/freezes",
    summary:
      "The freezes in force (freezes), the latest 20 lifted (lifted, with lifted_at), and the tenant's hash chain of every freeze and lift, checked (chain)",
    auth: "freezes:write or runs:read",
  },
  {
    method: "put",
    path: "/v1/tripwires/{id}",
    summary:
      'A tripwire (issue 34): { measure: "count" | "sum(<argument>)" | "failure_rate", tool?, subject?: "tenant" | "user" | "context.<field>", window, threshold, min_calls? (failure_rate), then: { mode, reason } } — counted on toolgate\'s own counters (once per operation); the call that goes above the threshold trips it: a freeze `tw.<id>.<n>.<subject hash>` stops every later call it counts for that subject until lifted (DELETE /v1/freezes/{id}), and `tripwire.tripped` is announced → { tripwire, runs_told, runs_pending }',
    auth: "freezes:write",
    body: TripwireBody,
  },
  {
    method: "delete",
    path: "/v1/tripwires/{id}",
    summary:
      "Remove a tripwire: it counts nothing more (a freeze it made stays until lifted) → { tripwire, runs_told, runs_pending } (404: none)",
    auth: "freezes:write",
  },
  {
    method: "get",
    path: "/v1/tripwires",
    summary: "The tenant's tripwires",
    auth: "freezes:write or runs:read",
  },
  {
    method: "post",
    path: "/v1/grants",
    summary:
      'A standing grant (issue 35): { tools, subject: "any" | { "context.<field>": value }, field? (the numeric argument bounded), per_call_max?, total_max?, count?, expires_at (≤ 31 days), reason } — a call that would ask a person, inside its bounds, runs without asking and is reserved against it once; outside, it asks a person. Made by the deciding person (Access identity, else the key) → 201 { grant, runs_told, runs_pending }',
    auth: "approvals:decide",
    body: GrantBody,
  },
  {
    method: "get",
    path: "/v1/grants",
    summary: "The tenant's grants (live, expired and revoked)",
    auth: "approvals:decide or runs:read",
  },
  {
    method: "get",
    path: "/v1/grants/{id}",
    summary:
      "One grant with its use so far (used), each use (operation_id, amount, at, state), and its chain: the tenant chain's check and this grant's entries (made, confirmed, revoked, each use once)",
    auth: "approvals:decide or runs:read",
  },
  {
    method: "post",
    path: "/v1/grants/{id}/confirm",
    summary:
      "Under the tenant's grant_four_eyes a grant is made proposed (it covers nothing): another person confirms it → { grant, runs_told, runs_pending }; its proposer's confirm is 403 self_approval, a grant not proposed 409 grant_not_proposed (nothing changed)",
    auth: "approvals:decide",
  },
  {
    method: "delete",
    path: "/v1/grants/{id}",
    summary:
      "Revoke a grant: every call not yet sent that relied on it asks a person, nothing sent → { grant, runs_told, runs_pending } (404: none)",
    auth: "approvals:decide",
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/pause",
    summary:
      "Pause a call waiting on a retry, a lock, a quota slot or a resend: it sends nothing until resumed (409 not_waiting otherwise)",
    auth: "operations:resolve",
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/resume",
    summary: "Resume a paused call where it was (409 not_waiting if not paused)",
    auth: "operations:resolve",
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/retry-now",
    summary:
      "Send a waiting retry or resend now, same idempotency key, within the host's retry budget (409 retry_budget_exhausted, origin_paused, frozen or not_waiting: nothing sent)",
    auth: "operations:resolve",
  },
  {
    method: "get",
    path: "/v1/limits/{name}/{subject}",
    summary:
      "A limit across runs for one subject, named with its kind (`context.customer_id:cus_42`, `user:u1`, `run:<run_id>` (a payment limit per run) or `tenant`; a bare value is 404): { name, subject, max, window_ms, used, remaining, held, waiting, next_free_at } — used counts each reservation until one window after its operation was recorded (applied or outcome unknown), and a call not yet done (awaiting approval, a lock or a retry) whatever its age (`waiting`: those past their window)",
    auth: "runs:read",
  },
  {
    method: "get",
    path: "/v1/runs",
    summary:
      "The tenant's runs from the tenant index (eventually consistent, fed by the event queue within seconds), newest first, with counts of their operations by status; filters status (active|cancelled|expired), tool, user, subject (`cus_42` or `customer_id:cus_42`), q (exact run id, operation id, user or subject), since/until (ISO) → { runs, next_cursor }",
    auth: "runs:read",
    query: ["status", "tool", "user", "subject", "q", "since", "until", "cursor", "limit"],
  },
  {
    method: "get",
    path: "/v1/operations",
    summary:
      "The tenant's operations from the tenant index, newest first: tool, status, code, user, subjects (top-level `*_id` arguments), attempts, latency_ms, created_at, settled_at; filters status, tool, code, user, subject, run_id, q, since/until → { operations, next_cursor }",
    auth: "runs:read",
    query: [
      "status",
      "tool",
      "code",
      "user",
      "subject",
      "run_id",
      "q",
      "since",
      "until",
      "cursor",
      "limit",
    ],
  },
  {
    method: "get",
    path: "/v1/overview",
    summary:
      "Counts since `since` (ISO, default 24 h ago, at most 7 days): the two queues (awaiting_approval, outcome_unknown, now), runs, operations by status, per tool calls, failure and unknown rates, p50/p95 latency_ms, and calls per 5 minutes by status",
    auth: "runs:read",
    query: ["since"],
  },
  {
    method: "get",
    path: "/v1/admin/stats",
    summary:
      "Development deployments only (404 elsewhere): SQL rows read and written and RPC calls by Class.method since the isolate started (the bench reads it)",
    auth: "admin token",
  },
  {
    method: "post",
    path: "/v1/admin/tenants/{tenant_id}/reindex",
    summary:
      'Rebuild the tenant index from the runs and operations themselves (the tenant\'s list of runs and the index\'s), in place: one step per call → { state: "running" | "done", runs, operations, missing, failed }',
    auth: "admin token",
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/resolve",
    summary: "A person's verdict on an outcome_unknown",
    auth: "operations:resolve",
    body: Resolve,
  },
  {
    method: "post",
    path: "/v1/operations/{operation_id}/compensate",
    summary:
      "Undo: run the tool's declared compensation as a new operation linked both ways (compensates / compensated_by), at most once however often asked → 201 first, 200 after, the compensation's view; only for an operation recorded as applied (else 409 operation_not_compensable); 422 compensation_arguments_invalid or policy_denied: nothing sent or recorded",
    auth: "operations:compensate",
    body: Compensate,
  },
  {
    method: "post",
    path: "/mcp",
    summary:
      "MCP Streamable HTTP (protocol 2025-11-25 and 2026-07-28): JSON-RPC tools/list and tools/call for the token's run",
    auth: "run token",
  },
  {
    method: "get",
    path: "/v1/operations/{operation_id}/receipt",
    summary:
      "The operation's signed receipts (issue 37): the latest and its chain, oldest first — one when it settled, one more when its compensation was linked, each naming the hash of the one before. Not settled yet: 409 receipt_not_ready (with its state); settled but its key out of reach just now: 503 receipt_pending. Another tenant's operation: 404, as an unknown one",
    auth: "traces:read",
    response: OperationReceipt,
  },
  {
    method: "get",
    path: "/v1/receipts",
    summary:
      "A receipt bundle to verify offline (npm run verify-receipts -- bundle.json --jwks jwks.json): exactly one of operation_id, run_id or subject (a bound subject as the tenant index means it: cus_42 or customer_id:cus_42; a run's and a subject's operations come from the index, a page of `limit` (≤ 100) operations at a time with `cursor`)",
    auth: "traces:read",
    query: ["operation_id", "run_id", "subject", "cursor", "limit"],
    response: ReceiptBundle,
  },
  {
    method: "get",
    path: "/v1/receipts/jwks",
    summary:
      "The tenant's receipt verification keys (Ed25519 JWKs with kid, not_before, not_after): every key it ever signed with",
    auth: "traces:read",
    response: ReceiptJwks,
  },
  {
    method: "post",
    path: "/v1/receipts/keys/rotate",
    summary:
      "Rotate the receipt signing key: a new key signs from now; the one it replaces ends 30 s later (the most an operation may still hold it) and stays published, so every receipt it signed still verifies → { keys }",
    auth: "receipts:admin",
    response: ReceiptJwks,
  },
  {
    method: "get",
    path: "/public/{tenant_id}/receipts/jwks.json",
    summary:
      "The tenant's receipt verification keys, public (what a third party verifies with); an unknown tenant is 404",
    auth: "none",
    response: ReceiptJwks,
  },
  {
    method: "get",
    path: "/",
    summary:
      "The front door: links to the console, these docs and the OpenAPI document (an HTML page for a browser, JSON otherwise; links start with TOOLGATE_CONSOLE_URL, else the request's origin)",
    auth: "none",
  },
  { method: "get", path: "/healthz", summary: "Liveness", auth: "none" },
  { method: "get", path: "/openapi.json", summary: "This document (OpenAPI 3.1)", auth: "none" },
  { method: "get", path: "/docs", summary: "This document as a page", auth: "none" },
];

const jsonSchema = (schema: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(schema, { io, unrepresentable: "any" });

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of ROUTES) {
    const parameters = [
      ...[...route.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
        name: m[1],
        in: "path",
        required: true,
        schema: { type: "string" },
      })),
      ...(route.query ?? []).map((name) => ({
        name,
        in: "query",
        required: false,
        schema: { type: "string" },
      })),
    ];
    paths[route.path] = {
      ...paths[route.path],
      [route.method]: {
        summary: route.summary,
        description: `Auth: ${route.auth}`,
        parameters,
        ...(route.body
          ? {
              requestBody: {
                required: true,
                content: { "application/json": { schema: jsonSchema(route.body, "input") } },
              },
            }
          : {}),
        responses: {
          "2XX": {
            description: "Success",
            ...(route.response
              ? {
                  content: { "application/json": { schema: jsonSchema(route.response, "output") } },
                }
              : {}),
          },
          default: {
            description: "Problem (RFC 9457)",
            content: { "application/problem+json": { schema: jsonSchema(Problem, "output") } },
          },
        },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "toolgate",
      version: "1",
      description:
        "Durable tool runner for AI agents: every proposed tool call runs at most once, and every call gets exactly one result.",
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      schemas: {
        Envelope: jsonSchema(Envelope, "output"),
        // What GET /v1/events lists and every webhook carries: one data schema per event type.
        ToolgateEvent: jsonSchema(ToolgateEvent, "output"),
        // A signed receipt (issue 37): docs/receipt.schema.json is the same schema.
        Receipt: jsonSchema(SignedReceiptSchema, "output"),
      },
    },
    security: [{ bearer: [] }],
    paths,
  };
}

const escape = (text: string) =>
  text.replace(/[&<>]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[ch]!);

export const docsRoutes = new Hono<AppEnv>()
  .get("/openapi.json", (c) => c.json(openApiDocument()))
  .get("/docs", (c) => {
    const rows = ROUTES.map(
      (r) =>
        `<section><h3><code>${r.method.toUpperCase()} ${escape(r.path)}</code></h3><p>${escape(r.summary)} — <em>${escape(r.auth)}</em></p>${
          r.body
            ? `<details><summary>request body</summary><pre>${escape(JSON.stringify(jsonSchema(r.body, "input"), null, 2))}</pre></details>`
            : ""
        }</section>`,
    ).join("\n");
    return c.html(`<!doctype html><html><head><meta charset="utf-8"><title>toolgate API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}pre{background:#f4f4f4;padding:1rem;overflow:auto}h3{margin-bottom:.2rem}</style></head>
<body><h1>toolgate API v1</h1><p>Machine-readable: <a href="/openapi.json">/openapi.json</a>. Errors are <code>application/problem+json</code> with a stable <code>code</code>.</p>${rows}</body></html>`);
  });
