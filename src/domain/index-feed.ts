// The tenant index (issue 20): what one tenant-plane event tells the index about its run and its
// operation, as patches the IndexObject upserts. Pure: the index is fed only from events (and, on a
// rebuild, from the objects' own `indexEntry` answers of the same shape), never consulted by the
// engine. A settled row (`rank` 2, operation.recorded) is only replaced by another settled one; an
// unsettled one by anything at least as new, so an event the queue delivers late changes nothing.
import type { RunSummary, ToolgateEvent } from "./journal/events.ts";

/** What the index holds for one operation. `status` is the model-facing status (DESIGN table). */
export type IndexOp = {
  operation_id: string;
  run_id: string;
  tool: string;
  status: string;
  code: string | null;
  attempts: number | null;
  /** First attempt sent → recorded (retry waits included; approval and lock waits not). */
  latency_ms: number | null;
  created_at_ms: number;
  settled_at_ms: number | null;
  /** A shadow run's call (issue 22): counted apart from live ones in the overview. */
  shadow: boolean;
  /** Top-level `*_id` arguments (redacted ones are absent from events), e.g. ["customer_id", "cus_42"]. */
  subjects: Array<[string, string]>;
  updated_at_ms: number;
  rank: 1 | 2;
};

/** What the index holds for one run (null fields: not yet told; a run's first turn.settled fills them). */
export type IndexRun = {
  run_id: string;
  user_id: string | null;
  created_at_ms: number;
  expires_at_ms: number | null;
  cancelled_at_ms: number | null;
  usage: { turns: number; tool_calls: number; cost: number } | null;
  updated_at_ms: number;
};

export type { RunSummary };

export type IndexPatch = { run: IndexRun | null; op: IndexOp | null };

const num = (value: unknown): number | null =>
  typeof value === "number" && Number.isFinite(value) ? value : null;

/** The top-level scalar `*_id` fields of (redacted) arguments: the subjects one can search by. */
export function subjectsOf(args: unknown): Array<[string, string]> {
  if (!args || typeof args !== "object" || Array.isArray(args)) return [];
  const out: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(args)) {
    if (!/^[A-Za-z0-9]+(_id|Id)$/.test(key)) continue;
    if (typeof value === "string" && value.length > 0 && value.length <= 200)
      out.push([key, value]);
    else if (typeof value === "number" && Number.isFinite(value)) out.push([key, String(value)]);
  }
  return out.slice(0, 16);
}

type OpFacts = {
  status: string;
  code: string | null;
  rank: 1 | 2;
  attempts: number | null;
  latency_ms: number | null;
  args: unknown;
};

/** What an event reports of its operation (null: nothing; exhaustive: a new type must say). */
function opFacts(event: ToolgateEvent): OpFacts | null {
  const open = (status: string, code: string | null, args: unknown): OpFacts => {
    return { status, code, rank: 1, attempts: null, latency_ms: null, args };
  };
  switch (event.type) {
    case "approval.requested":
      return open("awaiting_approval", null, event.data.arguments);
    case "approval.decided":
      return event.data.state === "rejected"
        ? open("rejected", "approval_rejected", event.data.arguments)
        : open("pending", null, event.data.arguments);
    case "approval.expired":
      return open("rejected", "approval_expired", event.data.arguments);
    // A routed approval's steps (issue 35) leave it waiting; quorum reached approves it.
    case "approval.voted":
    case "approval.reminded":
    case "approval.escalated":
      return open("awaiting_approval", null, event.data.arguments);
    case "approval.quorum_reached":
      return open("pending", null, event.data.arguments);
    case "operation.outcome_unknown":
      return open("outcome_unknown", event.data.code, event.data.arguments);
    case "lock.waiting_long":
    case "credential.required":
      return open("pending", null, undefined);
    case "operation.recorded": {
      const { status, code, attempts, latency_ms, arguments: args } = event.data;
      return { status, code, rank: 2, attempts: num(attempts), latency_ms: num(latency_ms), args };
    }
    case "turn.settled":
    case "run.budget_exhausted":
    case "endpoint.failing":
    case "webhook.test":
    case "freeze.created":
    case "freeze.lifted":
    case "tripwire.tripped":
    case "grant.created":
    case "grant.confirmed":
    case "grant.revoked":
    case "grant.used":
    case "grant.exhausted":
      return null;
  }
}

/** The run summary an event carries (turn.settled, run.budget_exhausted), null for the others. */
export function runSummaryOf(event: ToolgateEvent): RunSummary | null {
  switch (event.type) {
    case "turn.settled":
    case "run.budget_exhausted":
      return event.data.run;
    case "approval.requested":
    case "approval.decided":
    case "approval.expired":
    case "approval.voted":
    case "approval.reminded":
    case "approval.escalated":
    case "approval.quorum_reached":
    case "operation.outcome_unknown":
    case "operation.recorded":
    case "lock.waiting_long":
    case "credential.required":
    case "endpoint.failing":
    case "webhook.test":
    case "freeze.created":
    case "freeze.lifted":
    case "tripwire.tripped":
    case "grant.created":
    case "grant.confirmed":
    case "grant.revoked":
    case "grant.used":
    case "grant.exhausted":
      return null;
  }
}

/** When the event's operation was created (its own time for an event of no operation). */
function createdAtMs(event: ToolgateEvent): number {
  return "created_at_ms" in event.data ? event.data.created_at_ms : event.at_ms;
}

/** What one event changes in the index. */
export function indexPatch(event: ToolgateEvent): IndexPatch {
  const summary = runSummaryOf(event);
  const createdMs = createdAtMs(event);
  const run: IndexRun | null = event.run_id
    ? summary
      ? {
          run_id: event.run_id,
          user_id: summary.user,
          created_at_ms: summary.created_at_ms,
          expires_at_ms: num(summary.expires_at_ms),
          cancelled_at_ms: num(summary.cancelled_at_ms),
          usage: summary.usage,
          updated_at_ms: event.at_ms,
        }
      : {
          // Known by name (and, from an approval request, its user) until its first turn settles.
          run_id: event.run_id,
          user_id: event.type === "approval.requested" ? event.data.requested_by : null,
          created_at_ms: createdMs,
          expires_at_ms: null,
          cancelled_at_ms: null,
          usage: null,
          updated_at_ms: 0,
        }
    : null;
  const facts = opFacts(event);
  const op: IndexOp | null =
    facts && event.operation_id && event.run_id
      ? {
          operation_id: event.operation_id,
          run_id: event.run_id,
          tool: event.tool ?? "",
          status: facts.status,
          code: facts.code,
          attempts: facts.attempts,
          latency_ms: facts.latency_ms,
          created_at_ms: createdMs,
          settled_at_ms: facts.rank === 2 ? event.at_ms : null,
          subjects: subjectsOf(facts.args),
          shadow: "shadow" in event.data && event.data.shadow === true,
          updated_at_ms: event.at_ms,
          rank: facts.rank,
        }
      : null;
  return { run, op };
}

/** Whether `next` replaces the stored row (`held`: its rank and time; null when there is none). */
export function replaces(held: { rank: number; updated_at_ms: number } | null, next: IndexOp) {
  if (!held) return true;
  if (next.rank !== held.rank) return next.rank > held.rank;
  return next.updated_at_ms >= held.updated_at_ms;
}

/** The value at quantile q (0..1) of ascending `sorted` (nearest rank; null when empty). */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/** A list cursor: the last row's (time, id), opaque to clients. */
export function encodeCursor(atMs: number, id: string): string {
  return btoa(`${atMs}|${id}`).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}

export function decodeCursor(cursor: string): { atMs: number; id: string } | null {
  try {
    const text = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    const match = /^(\d{1,16})\|([A-Za-z0-9_]{1,80})$/.exec(text);
    return match ? { atMs: Number(match[1]), id: match[2]! } : null;
  } catch {
    return null;
  }
}

/** Operation statuses one can filter by (the model-facing ones). */
export const OP_STATUSES = [
  "succeeded",
  "rejected",
  "failed",
  "budget_exhausted",
  "cancelled",
  "outcome_unknown",
  "awaiting_approval",
  "pending",
] as const;
export const RUN_STATUSES = ["active", "cancelled", "expired"] as const;
