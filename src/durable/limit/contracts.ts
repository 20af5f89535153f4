// The LimitObject's contract (issue 21): one object per (tenant, limit across runs, subject). Its
// RPCs reserve (idempotent by operation id), release (only when nothing was applied) and report
// usage; errors are values, never thrown across the stub.
import type { LimitClaim, Usage } from "../../domain/limit/window.ts";

export type ReserveRequest = LimitClaim & { tenantId: string; operationId: string };
export type ReserveReply =
  | { kind: "reserved"; already: boolean; over: boolean; usage: Usage }
  | { kind: "refused"; usage: Usage; freesAtMs: number | null };
export type LimitUsage = {
  name: string;
  subject: string;
  max: number;
  window_ms: number;
  used: number;
  remaining: number;
  /** Operations holding a reservation inside the window. */
  held: number;
  /** When the oldest held reservation leaves the window (null: none held). */
  next_free_at: string | null;
};
export type LimitError = { code: "not_found" };
