// What a CredentialObject RPC answers with (issue 36): its errors (problem.ts maps each `code`),
// and the token answer an operation gets immediately before a send. A token value crosses only in
// `Token.accessToken`, to the operation that sends it; every other answer carries none.
import type { Health } from "../../domain/credential.ts";

export type CredentialError =
  | { code: "connection_state_invalid"; detail: string }
  | { code: "connection_failed"; detail: string }
  | { code: "unknown_oauth_provider"; detail: string }
  | { code: "misconfigured"; detail: string }
  | { code: "unavailable"; detail: string };

/** Before a send: the access token, or why there is none. */
export type TokenAnswer =
  | { kind: "token"; accessToken: string }
  /** Never connected, `invalid_grant`, scopes missing: the user must (re)connect; nothing sent. */
  | { kind: "needs_consent"; reason: string }
  /** The provider or the network failed just now (5xx, timeout): retried like a 503. */
  | { kind: "transient"; detail: string };

/** GET /v1/connections: one provider's connection for one user, without any token. */
export type ConnectionView = {
  provider: string;
  user: string;
  health: Health;
  scopes: string[];
  expires_at: string | null;
  connected_at: string | null;
  /** Why the user must consent again (invalid_grant, disconnected), when that is the health. */
  reason: string | null;
};
