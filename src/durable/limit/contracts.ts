// The LimitObject's contract (issue 21): one object per (tenant, limit across runs, subject key).
// Its RPCs reserve (idempotent by operation id), release (only when nothing was applied), report
// usage and hand over held reservations to the object that replaces it (subjects namespaced, audit
// N7); errors are values, never thrown across the stub.
import type { Frees, LimitClaim, Usage } from "../../domain/limit/window.ts";
import type { Freeze } from "../../domain/freeze.ts";
import type { TripSpec } from "../../domain/tripwire.ts";

/**
 * `trip`: the counter is a tripwire's (issue 34): it trips instead of refusing. `resize`: a
 * person's edit changed the amount this operation holds (issue 35 item 2, window.ts decideResize).
 */
export type ReserveRequest = LimitClaim & {
  tenantId: string;
  operationId: string;
  trip?: TripSpec;
  resize?: true;
};
export type ReserveReply =
  | { kind: "reserved"; already: boolean; over: boolean; usage: Usage }
  | { kind: "refused"; usage: Usage; frees: Frees }
  /** A tripwire's counter is tripped: stopped by `freeze` (`made`: it exists at the tenant). */
  | { kind: "tripped"; freeze: Freeze; made: boolean };
export type LimitUsage = {
  name: string;
  subject: string;
  max: number;
  window_ms: number;
  used: number;
  remaining: number;
  /** Operations whose reservation counts. */
  held: number;
  /** Of those, the ones past their window that count only because their operation is not done (awaiting approval, a lock, a retry). */
  waiting: number;
  /** The earliest a counting reservation can leave (null: none held, or only waiting ones). */
  next_free_at: string | null;
};
/** A reservation as `uses` lists it (a grant's uses). */
export type UseRow = {
  operationId: string;
  amount: number;
  atMs: number;
  state: "held" | "released";
};
/** A held reservation as a legacy object hands it over. */
export type HandedOver = { operationId: string; amount: number; atMs: number };
export type LimitError = { code: "not_found" };
