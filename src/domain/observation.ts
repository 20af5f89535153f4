// What one attempt (or one reconcile lookup) observed at the network edge, as plain data. The HTTP
// executor produces exactly one of these per attempt, whatever fails (it never throws), and
// classify() turns them into decisions. There is no "nothing was sent" observation: the executor
// cannot know it (workerd reports refused, reset and dropped connections alike); the only proof is
// an answer from Cloudflare's edge (521/522/523), which arrives as an `http_error`.
export type Observation =
  /** `status`: the 2xx the upstream answered (absent where no HTTP answer carried the result). */
  | { kind: "ok"; result: unknown; status?: number }
  | { kind: "invalid_output"; detail: string }
  /** A 2xx status and its headers arrived, then the body could not be read (stalled past the timeout, or dropped). */
  | { kind: "body_lost"; timedOut: boolean; detail: string }
  | { kind: "http_error"; status: number; retryAfterMs: number | null; detail: string }
  | { kind: "timeout"; detail: string }
  | { kind: "connection_lost"; detail: string }
  | { kind: "crash" }
  /** The request could not be built (a secret is missing, the stored tool no longer compiles): nothing was sent. */
  | { kind: "config_error"; detail: string }
  /**
   * toolgate could not prepare the request because one of its own objects did not answer (the
   * tenant's secrets): it was never handed to the network, so nothing was sent (known, not guessed).
   */
  | { kind: "not_sent"; detail: string };

export type LookupObservation =
  | { kind: "found"; result: unknown }
  | { kind: "not_found" }
  | { kind: "inconclusive"; detail: string };
