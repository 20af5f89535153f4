// The errors a TenantObject RPC answers with (problem.ts maps each `code` to HTTP). The modules
// beside the object and the routes import them from object.ts, which re-exports this type.
import type { GrantConfirmError } from "../../domain/grant.ts";
import type { LimitConflict } from "../../domain/limit/definition.ts";
import type { ManifestError } from "../../tools/manifest/schema.ts";
import type { SecretsError } from "./secrets.ts";
import type { WebhooksError } from "./webhooks.ts";

export type TenantError =
  | ManifestError
  | SecretsError
  | WebhooksError
  | { code: "not_found"; detail: string }
  | { code: "invalid_request"; detail: string }
  /** A verification finished after the tool's checked settings were replaced (or it was deleted). */
  | { code: "tool_changed"; detail: string }
  | { code: "invalid_policy"; detail: string }
  /** A tool PUT or DELETE would make the stored Cedar policy set fail validation (without ?force=1). */
  | { code: "tool_breaks_policy_set"; detail: string }
  /** PUT /v1/tools/{name}: a limit across runs another tool defines otherwise (audit N4); nothing stored. */
  | ({ code: "limit_conflict" } & LimitConflict)
  /** PUT /v1/quotas/{id}: another quota defines the same key otherwise (one definition per key); nothing stored. */
  | { code: "quota_conflict"; detail: string; quota: string }
  /** PUT /v1/freezes/{id} with an expires_at not in the future (domain/freeze.ts). */
  | { code: "freeze_expired"; detail: string }
  /** POST /v1/grants/{id}/confirm by the person who proposed it, or of a grant not proposed. */
  | GrantConfirmError
  /** A connection or a tool's `auth` names no OAuth provider of the tenant (issue 36). */
  | { code: "unknown_oauth_provider"; detail: string }
  /** DELETE /v1/oauth-providers/{id} while tools act as the user with it (without ?force=1). */
  | { code: "oauth_provider_in_use"; detail: string; tools: string[] };
