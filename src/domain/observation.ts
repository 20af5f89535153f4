// What one attempt (or one reconcile lookup) observed at the network edge, as plain data. The HTTP
// executor produces these; classify() turns them into decisions. `not_sent` is only reported when
// toolgate *knows* no byte reached the upstream (the TCP connection was refused or never resolved).
export type Observation =
  | { kind: "ok"; result: unknown }
  | { kind: "invalid_output"; detail: string }
  | { kind: "http_error"; status: number; retryAfterMs: number | null; detail: string }
  | { kind: "not_sent"; detail: string }
  | { kind: "timeout"; detail: string }
  | { kind: "connection_lost"; detail: string }
  | { kind: "crash" }
  | { kind: "config_error"; detail: string };

export type LookupObservation =
  | { kind: "found"; result: unknown }
  | { kind: "not_found" }
  | { kind: "inconclusive"; detail: string };
