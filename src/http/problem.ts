// The one place errors become HTTP: RFC 9457 problem+json with a stable `code`. Both switches are
// exhaustive with no default: a new Durable Object error arm cannot compile without an API error,
// and a new API error cannot compile without its status.
import type { LimitError } from "../durable/limit/contracts.ts";
import type { OperationError } from "../durable/operation/contracts.ts";
import type { RunError } from "../durable/run/contracts.ts";
import type { TenantError } from "../durable/tenant/object.ts";
import type { ConfigError } from "../config.ts";
import type { ManifestError } from "../tools/manifest/schema.ts";
import type { VerifyError } from "../tools/verify.ts";
import type { CredentialError } from "../durable/credential/contracts.ts";

/** Every error a Durable Object RPC (or the deployment's configuration) can return. */
export type ObjectError =
  | RunError
  | TenantError
  | OperationError
  | ManifestError
  | ConfigError
  | VerifyError
  | LimitError
  | CredentialError;

/** Which check refused a Cloudflare Access token (http/access.ts). */
export type AccessRefusal =
  | "malformed"
  | "algorithm"
  | "signature"
  | "unknown_key"
  | "expired"
  | "not_yet_valid"
  | "audience"
  | "issuer";

export type ApiError =
  | { code: "unauthorized"; detail: string }
  /** A `Cf-Access-Jwt-Assertion` that does not verify (issue 35); nothing was decided. */
  | { code: "access_denied"; detail: string; reason: AccessRefusal }
  /** A tenant API key of the old, untagged format, refused at the edge: the admin should reissue it. */
  | { code: "api_key_outdated"; detail: string }
  | { code: "forbidden"; detail: string }
  | { code: "not_found"; detail: string }
  | { code: "invalid_request"; detail: string }
  | { code: "invalid_json"; detail: string }
  | { code: "unsupported_media_type"; detail: string }
  | { code: "payload_too_large"; detail: string }
  | { code: "invalid_manifest"; detail: string }
  /** PUT /v1/policies: the Cedar policy set does not parse or validate against the tenant's tools (Cedar's message). */
  | { code: "invalid_policy"; detail: string }
  /** PUT/DELETE /v1/tools/{name} would make the stored Cedar set fail validation (Cedar's message); nothing stored. */
  | { code: "tool_breaks_policy_set"; detail: string }
  | { code: "upstream_not_allowed"; detail: string }
  /** PUT /v1/webhooks/{id}: the URL fails the tool URL rules (https, allow-list, no private address). */
  | { code: "webhook_url_not_allowed"; detail: string }
  | { code: "unsupported_field"; detail: string }
  /** POST /v1/admin/tenants with a jurisdiction toolgate cannot place objects in. */
  | { code: "unsupported_jurisdiction"; detail: string }
  | { code: "invalid_pointer"; detail: string }
  | { code: "unknown_secret"; detail: string }
  /** PUT /v1/tools/{name}: its `compensate` cannot run as declared (undo, issue 22). */
  | { code: "invalid_compensation"; detail: string }
  /** PUT /v1/tools/{name}: a limit across runs another tool defines otherwise (one definition per name); nothing stored. */
  | {
      code: "limit_conflict";
      detail: string;
      limit: string;
      tool: string;
      fields: string[];
    }
  /** PUT /v1/quotas/{id}: another quota (`quota`) defines the same key otherwise; nothing stored. */
  | { code: "quota_conflict"; detail: string; quota: string }
  /** POST …/compensate: the rendered arguments fail the compensating tool's current schema or gate; nothing sent. */
  | { code: "compensation_arguments_invalid"; detail: string }
  /** POST …/compensate: only an operation recorded as applied may be undone; `state`: how it stands. */
  | { code: "operation_not_compensable"; detail: string; state: string }
  /**
   * Retention removed this settled operation; it will not run again. `pruned_at` travels in the
   * problem, and `settled_as`: the recorded outcome's status (`status` is the HTTP status there).
   */
  | {
      code: "operation_pruned";
      detail: string;
      operation_id: string;
      pruned_at: string;
      settled_as: string;
    }
  /** Retention removed this run's turns once it had expired and all its operations were pruned. */
  | { code: "run_pruned"; detail: string; run_id: string; pruned_at: string }
  | { code: "not_outcome_unknown"; detail: string }
  | { code: "not_awaiting_approval"; detail: string }
  | { code: "approval_mismatch"; detail: string }
  | { code: "self_approval"; detail: string }
  /** A routed approval (issue 35): the decider is in none of the groups it is routed to now; nothing counted. */
  | { code: "not_an_approver"; detail: string }
  /** The tool asks for a passkey step-up (issue 35) and the approval came without one. */
  | { code: "step_up_required"; detail: string }
  /** A passkey assertion that does not verify for this operation and this person; nothing decided. */
  | { code: "step_up_failed"; detail: string }
  | { code: "resend_not_allowed"; detail: string }
  | { code: "turn_conflict"; detail: string }
  | { code: "run_turn_limit"; detail: string }
  /** POST /v1/runs with a request_id already used for a run created from another body. */
  | { code: "request_id_conflict"; detail: string }
  | { code: "unknown_tool"; detail: string }
  | { code: "host_not_allowed"; detail: string }
  | { code: "origin_not_allowed"; detail: string }
  | { code: "not_verifiable"; detail: string }
  | { code: "invalid_arguments"; detail: string }
  | { code: "policy_denied"; detail: string }
  | { code: "tool_changed"; detail: string }
  | { code: "misconfigured"; detail: string }
  /** Something toolgate needs did not answer just now; nothing was changed or sent. Try again. */
  | { code: "unavailable"; detail: string }
  | { code: "internal"; detail: string }
  /** pause / resume / retry-now on an operation not waiting in a way they apply to (issue 34). */
  | { code: "not_waiting"; detail: string; phase: string }
  /** A person's send while a freeze applies to the operation; nothing was sent (issue 34). */
  | { code: "frozen"; detail: string; freeze_id: string }
  /** Retry-now refused by the host's retry budget; nothing was sent (issue 34). */
  | { code: "retry_budget_exhausted"; detail: string; retry_after_ms: number }
  /** Retry-now while the upstream has paused the call's origin (issue 34 item 4); nothing was sent. */
  | { code: "origin_paused"; detail: string; retry_after_ms: number }
  /** PUT /v1/freezes/{id}: expires_at is not in the future. */
  | { code: "freeze_expired"; detail: string }
  /** A person's edit changed a bound or operation-key field (issue 35 item 2); nothing was changed. */
  | { code: "field_not_editable"; detail: string; field: string }
  /** POST /v1/grants/{id}/confirm of a grant that is not proposed (live, revoked, expired). */
  | { code: "grant_not_proposed"; detail: string }
  /** GET /v1/operations/{id}/receipt of an operation not settled yet: a receipt is signed when it is. */
  | { code: "receipt_not_ready"; detail: string; state: string }
  /** Settled, but its receipt could not be signed just now (the tenant's key out of reach); try again. */
  | { code: "receipt_pending"; detail: string }
  /** A rollback's plan approval when no rollback runs or nothing is left in its plan (issue 35). */
  | { code: "rollback_not_running"; detail: string }
  /** A tool's `auth`, a connection or a provider route names no OAuth provider of the tenant (issue 36). */
  | { code: "unknown_oauth_provider"; detail: string }
  /** DELETE /v1/oauth-providers/{id} while tools act as the user with it (without ?force=1); nothing deleted. */
  | { code: "oauth_provider_in_use"; detail: string; tools: string[] }
  /** PUT /v1/oauth-providers/{id}: discovery failed, or an endpoint fails the host rules; nothing stored. */
  | { code: "oauth_provider_invalid"; detail: string }
  /** The OAuth callback's state is not one toolgate issued, or was used already; nothing stored. */
  | { code: "connection_state_invalid"; detail: string }
  /** The provider refused the code exchange (the user denied, a code replayed); nothing stored. */
  | { code: "connection_failed"; detail: string };

export function toApiError(error: ObjectError): ApiError {
  switch (error.code) {
    case "not_found":
      return { code: "not_found", detail: "detail" in error ? error.detail : "not found" };
    case "forbidden":
    case "invalid_request":
    case "invalid_manifest":
    case "invalid_policy":
    case "tool_breaks_policy_set":
    case "upstream_not_allowed":
    case "webhook_url_not_allowed":
    case "turn_conflict":
    case "run_turn_limit":
    case "request_id_conflict":
    case "unknown_tool":
    case "misconfigured":
    case "unsupported_field":
    case "invalid_pointer":
    case "unknown_secret":
    case "invalid_compensation":
    case "compensation_arguments_invalid":
    case "resend_not_allowed":
    case "self_approval":
    case "approval_mismatch":
    case "not_verifiable":
    case "invalid_arguments":
    case "policy_denied":
    case "tool_changed":
    case "unavailable":
      return { code: error.code, detail: error.detail };
    // Its own arm: TypeScript checks a shared `{ code, detail }` against at most 25 codes at once.
    case "step_up_required":
    case "not_an_approver":
      return { code: error.code, detail: error.detail };
    case "freeze_expired":
      return { code: error.code, detail: error.detail };
    case "grant_not_proposed":
    case "rollback_not_running":
      return { code: error.code, detail: error.detail };
    case "not_waiting":
      return {
        code: "not_waiting",
        phase: error.phase,
        detail: `the operation is ${error.phase}: ${error.detail}`,
      };
    case "frozen":
      return { code: "frozen", detail: error.detail, freeze_id: error.freeze_id };
    case "field_not_editable":
      return { code: error.code, detail: error.detail, field: error.field };
    case "retry_budget_exhausted":
    case "origin_paused":
      return { code: error.code, detail: error.detail, retry_after_ms: error.retry_after_ms };
    case "not_awaiting_approval":
      return {
        code: "not_awaiting_approval",
        detail: `the operation is ${error.phase}, not awaiting approval`,
      };
    case "not_outcome_unknown":
      return {
        code: "not_outcome_unknown",
        detail: `the operation is ${error.phase}, not outcome_unknown`,
      };
    case "invalid_tool":
      // A stored tool that no longer compiles (e.g. the host allow-list shrank): the deployment's doing.
      return { code: "misconfigured", detail: `the tool no longer compiles: ${error.detail}` };
    case "already_started":
    case "not_started":
      return { code: "internal", detail: error.code };
    case "operation_not_compensable":
      return { code: error.code, detail: error.detail, state: error.state };
    case "limit_conflict":
      return {
        code: error.code,
        detail: error.detail,
        limit: error.limit,
        tool: error.tool,
        fields: error.fields,
      };
    case "quota_conflict":
      return { code: error.code, detail: error.detail, quota: error.quota };
    case "oauth_provider_in_use":
      return { code: error.code, detail: error.detail, tools: error.tools };
    case "unknown_oauth_provider":
    case "connection_state_invalid":
    case "connection_failed":
      return { code: error.code, detail: error.detail };
    case "pruned":
      return prunedProblem(error.operation_id, error.pruned_at_ms, error.status);
    case "run_pruned": {
      const prunedAt = new Date(error.pruned_at_ms).toISOString();
      return {
        code: "run_pruned",
        run_id: error.run_id,
        pruned_at: prunedAt,
        detail: `run ${error.run_id} expired and its record was pruned at ${prunedAt} (retention)`,
      };
    }
  }
}

/**
 * A settled operation removed by retention: what callers are told instead of a second execution.
 * `status`: how it was settled (succeeded, rejected, failed…), the one fact its tombstone keeps.
 */
export function prunedProblem(operationId: string, prunedAtMs: number, status: string): ApiError {
  const prunedAt = new Date(prunedAtMs).toISOString();
  return {
    code: "operation_pruned",
    operation_id: operationId,
    pruned_at: prunedAt,
    settled_as: status,
    detail: `operation ${operationId} was settled earlier as ${status}; its record was pruned at ${prunedAt} (retention); toolgate will not send it again`,
  };
}

export function statusOf(error: ApiError): number {
  switch (error.code) {
    case "unauthorized":
    case "api_key_outdated":
    case "access_denied":
    case "step_up_failed":
      return 401;
    case "forbidden":
    case "upstream_not_allowed":
    case "self_approval":
    case "not_an_approver":
    case "step_up_required":
    case "host_not_allowed":
    case "origin_not_allowed":
      return 403;
    case "not_found":
    case "unknown_tool":
      return 404;
    case "invalid_request":
    case "invalid_json":
    case "connection_state_invalid":
      return 400;
    case "unsupported_media_type":
      return 415;
    case "payload_too_large":
      return 413;
    case "invalid_manifest":
    case "invalid_policy":
    case "tool_breaks_policy_set":
    case "webhook_url_not_allowed":
    case "unsupported_field":
    case "unsupported_jurisdiction":
    case "invalid_pointer":
    case "unknown_secret":
    case "not_verifiable":
    case "invalid_arguments":
    case "policy_denied":
    case "invalid_compensation":
    case "compensation_arguments_invalid":
    case "limit_conflict":
    case "quota_conflict":
    case "freeze_expired":
    case "field_not_editable":
    case "unknown_oauth_provider":
    case "oauth_provider_invalid":
    case "connection_failed":
      return 422;
    case "operation_pruned":
    case "run_pruned":
      return 410;
    case "not_outcome_unknown":
    case "grant_not_proposed":
    case "rollback_not_running":
    case "not_awaiting_approval":
    case "approval_mismatch":
    case "resend_not_allowed":
    case "turn_conflict":
    case "run_turn_limit":
    case "request_id_conflict":
    case "tool_changed":
    case "operation_not_compensable":
    case "not_waiting":
    case "frozen":
    case "retry_budget_exhausted":
    case "origin_paused":
    case "receipt_not_ready":
    case "oauth_provider_in_use":
      return 409;
    case "misconfigured":
    case "internal":
      return 500;
    case "unavailable":
    case "receipt_pending":
      return 503;
  }
}

/**
 * The same errors inside MCP's JSON-RPC (JSON-RPC 2.0 §5.1 codes): what the request named or sent
 * is wrong → -32602 Invalid params (MCP: an error in finding the tool is a protocol error, not a
 * tool result); anything else toolgate could not do → -32603 Internal error.
 */
export function jsonRpcCodeOf(error: ApiError): -32602 | -32603 {
  switch (error.code) {
    case "not_found":
    case "operation_pruned":
    case "run_pruned":
    case "unknown_tool":
    case "invalid_request":
    case "invalid_json":
    case "turn_conflict":
    case "request_id_conflict":
    case "payload_too_large":
    case "unsupported_media_type":
      return -32602;
    case "unauthorized":
    case "api_key_outdated":
    case "access_denied":
    case "forbidden":
    case "invalid_manifest":
    case "invalid_policy":
    case "tool_breaks_policy_set":
    case "upstream_not_allowed":
    case "webhook_url_not_allowed":
    case "unsupported_field":
    case "unsupported_jurisdiction":
    case "unknown_secret":
    case "invalid_compensation":
    case "compensation_arguments_invalid":
    case "limit_conflict":
    case "quota_conflict":
    case "operation_not_compensable":
    case "not_outcome_unknown":
    case "grant_not_proposed":
    case "rollback_not_running":
    case "not_awaiting_approval":
    case "approval_mismatch":
    case "self_approval":
    case "not_an_approver":
    case "step_up_required":
    case "step_up_failed":
    case "resend_not_allowed":
    case "run_turn_limit":
    case "host_not_allowed":
    case "origin_not_allowed":
    case "not_verifiable":
    case "invalid_arguments":
    case "field_not_editable":
    case "policy_denied":
    case "tool_changed":
    case "invalid_pointer":
    case "misconfigured":
    case "unavailable":
    case "internal":
    case "not_waiting":
    case "frozen":
    case "retry_budget_exhausted":
    case "origin_paused":
    case "freeze_expired":
    case "receipt_not_ready":
    case "receipt_pending":
    case "unknown_oauth_provider":
    case "oauth_provider_invalid":
    case "oauth_provider_in_use":
    case "connection_state_invalid":
    case "connection_failed":
      return -32603;
  }
}

export class ApiProblem extends Error {
  constructor(readonly error: ApiError) {
    super(error.detail);
  }
}

/** `extra`: RFC 9457 extension members (e.g. a turn's results next to an `operation_pruned`). */
export function problemResponse(error: ApiError, extra: Record<string, unknown> = {}): Response {
  const status = statusOf(error);
  const { code, detail, ...members } = error;
  const body = {
    type: `https://toolgate.dev/problems/${code}`,
    title: code.replace(/_/g, " "),
    status,
    code,
    detail,
    ...members,
    ...extra,
  };
  const headers: Record<string, string> = { "Content-Type": "application/problem+json" };
  // RFC 6750 §3: a 401 names the scheme it wants (MCP clients read it to tell auth from other errors).
  if (status === 401) headers["WWW-Authenticate"] = 'Bearer realm="toolgate"';
  // RFC 9110 §10.2.3: a 503 says when to try again (nothing was changed, so trying again is safe).
  if (status === 503) headers["Retry-After"] = "5";
  return new Response(JSON.stringify(body), { status, headers });
}
