// The fault soak's pure half (issue 7, "Prove it"): a seeded plan of operations and upstream faults,
// and the invariants checked against the fault-injecting upstream's ledger. No I/O and no
// Math.random here: the same seed always yields the same plan, so a red run can be replayed
// (`SOAK_SEED=… SOAK_OPS=… npm run soak`). The driver is test/integration/soak.test.ts.
import type { Fault } from "../../demo/upstream.ts";
import type { UpstreamState } from "./api.ts";

export type Kind = "keyed" | "lookup" | "neither" | "read";
export const KINDS: readonly Kind[] = ["keyed", "lookup", "neither", "read"];

/** Every tool's timeout; `slow` answers are drawn on both sides of it. */
export const TIMEOUT_MS = 300;
/**
 * The lookup-only tool trusts a 404 from (ambiguous attempt start + TIMEOUT_MS + SETTLE_MS). An
 * abandoned request that commits later than that would be a second effect by design (DESIGN:
 * "a 404 proves only not applied *yet*"), so `slow` answers stay far inside the window
 * (≤ SLOW_MAX_MS) to keep the soak about toolgate, not about a loaded machine's scheduling.
 */
export const SETTLE_MS = 1_200;
export const SLOW_MAX_MS = 500;

/** mulberry32: a tiny seeded PRNG, uniform in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Rng = () => number;
const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;
const between = (rng: Rng, min: number, max: number) => min + Math.floor(rng() * (max - min + 1));
/** An independent stream per (seed, conversation): concurrency and timing never shift another's choices. */
export const streamFor = (seed: number, index: number): Rng =>
  mulberry32((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);

/** Weighted fault menu: every fault kind of the brief, `slow` on both sides of the timeout. */
const FAULTS: Array<[number, (rng: Rng) => Fault]> = [
  [4, () => ({ kind: "ok" })],
  [2, (rng) => ({ kind: "status", status: 503, commit: rng() < 0.3 })],
  [2, (rng) => ({ kind: "status", status: 500, commit: rng() < 0.3 })],
  [2, () => ({ kind: "status", status: 429 })],
  [1, () => ({ kind: "status", status: 409 })],
  [1, () => ({ kind: "status", status: 400 })],
  [2, () => ({ kind: "commit_then_hang" })],
  [2, () => ({ kind: "commit_then_reset" })],
  [1, () => ({ kind: "hang" })],
  // Drawn by a status lookup, these answer it too: an inconclusive lookup is asked again later.
  [1, (rng) => ({ kind: "status", status: pick(rng, [500, 503]), lookups: true })],
  [1, () => ({ kind: "hang", lookups: true })],
  [2, () => ({ kind: "reset" })],
  [2, (rng) => ({ kind: "slow", delayMs: between(rng, 10, TIMEOUT_MS - 100) })],
  [3, (rng) => ({ kind: "slow", delayMs: between(rng, TIMEOUT_MS + 50, SLOW_MAX_MS) })],
  [1, () => ({ kind: "headers_then_stall" })],
  [1, () => ({ kind: "headers_then_drop" })],
  [2, (rng) => ({ kind: "gateway", status: pick(rng, [521, 522, 523]) })],
  // A proxy's 5xx never reaches the idempotency layer: after a committed attempt it is what keeps
  // a keyed write from being answered by its stored replay (the soak's finding 1 of issue 7).
  [1, (rng) => ({ kind: "gateway", status: pick(rng, [502, 503]) })],
  [1, () => ({ kind: "invalid_json" })],
];
const FAULT_WEIGHT = FAULTS.reduce((sum, [weight]) => sum + weight, 0);

function drawFault(rng: Rng): Fault {
  let roll = rng() * FAULT_WEIGHT;
  for (const [weight, make] of FAULTS) {
    roll -= weight;
    if (roll < 0) return make(rng);
  }
  return { kind: "ok" };
}

/** Faults after which the write may have taken effect without toolgate learning so. */
const AMBIGUOUS: Array<(rng: Rng) => Fault> = [
  () => ({ kind: "commit_then_hang" }),
  () => ({ kind: "commit_then_reset" }),
  () => ({ kind: "hang" }),
  // Twice: an answer that outlives the timeout and commits later is issue 7's finding 2.
  (rng) => ({ kind: "slow", delayMs: between(rng, TIMEOUT_MS + 50, SLOW_MAX_MS) }),
  (rng) => ({ kind: "slow", delayMs: between(rng, TIMEOUT_MS + 50, SLOW_MAX_MS) }),
  () => ({ kind: "status", status: 500, commit: true }),
  () => ({ kind: "headers_then_drop" }),
];

/**
 * A third of the scripts are the shape issue 7 found lies in: an ambiguous attempt, then proxies
 * answering 5xx/52x until the budget runs out (they never reach the idempotency layer, so the
 * stored replay cannot settle it). The rest: 0–5 random faults, a quarter of them ending with
 * their last fault repeated (a flapping upstream).
 */
function drawFaults(rng: Rng): Fault[] {
  if (rng() < 0.33) {
    const tail = Array.from({ length: between(rng, 1, 4) }, (): Fault => ({
      kind: "gateway",
      status: pick(rng, [502, 503, 521, 522, 523]),
    }));
    return [pick(rng, AMBIGUOUS)(rng), ...tail];
  }
  const faults = Array.from({ length: pick(rng, [0, 1, 1, 2, 2, 3, 4, 5]) }, () => drawFault(rng));
  const last = faults[faults.length - 1];
  if (last && rng() < 0.25) faults.push(...Array.from({ length: between(rng, 1, 3) }, () => last));
  return faults;
}

export type OpPlan = {
  kind: Kind;
  args: { amount: number; currency: "usd" | "eur" };
  /** Scripted on the operation's own namespace, consumed in order by its requests (lookups included). */
  faults: Fault[];
  /** The tool's max_attempts: small budgets reach exhaustion after an ambiguous attempt. */
  maxAttempts: number;
  /** The model re-proposes it later: a new call id, the same arguments. */
  repropose: boolean;
};
export type ConversationPlan = {
  index: number;
  ops: OpPlan[];
  /** Prefer: wait=… of the first post (0: the operations are still in flight when it answers). */
  waitSeconds: number;
  /** The same turn (same call ids) posted twice: concurrently, or again after the first answer. */
  twice: "no" | "concurrent" | "sequential";
  /** Abort every operation object right after the first post, mid-flight. */
  abortAfterPost: boolean;
  /** Per drive round and operation: the chance its object is aborted before the step. */
  abortChance: number;
  /** The round before which the run object is aborted (null: never). */
  abortRunAtRound: number | null;
};

/**
 * Conversations of 1–3 calls each until `ops` operations are planned; amounts are unique per soak.
 * Kinds rotate (from a seeded start), so every kind gets a quarter of the operations.
 */
export function planSoak(seed: number, ops: number): ConversationPlan[] {
  const plans: ConversationPlan[] = [];
  const rotation = Math.floor(mulberry32(seed)() * KINDS.length);
  let planned = 0;
  for (let index = 0; planned < ops; index++) {
    const rng = streamFor(seed, index);
    const size = Math.min(ops - planned, between(rng, 1, 3));
    const conversation: ConversationPlan = {
      index,
      ops: Array.from({ length: size }, (_, i) => ({
        kind: KINDS[(rotation + planned + i) % KINDS.length]!,
        args: { amount: planned + i + 1, currency: pick(rng, ["usd", "eur"] as const) },
        faults: drawFaults(rng),
        maxAttempts: pick(rng, [2, 2, 3, 3, 4, 5]),
        repropose: rng() < 0.35,
      })),
      waitSeconds: pick(rng, [0, 0, 1]),
      twice: pick(rng, ["no", "concurrent", "sequential", "sequential"] as const),
      abortAfterPost: rng() < 0.2,
      abortChance: pick(rng, [0, 0.05, 0.15]),
      abortRunAtRound: rng() < 0.25 ? between(rng, 0, 4) : null,
    };
    plans.push(conversation);
    planned += size;
  }
  return plans;
}

// ── invariants ────────────────────────────────────────────────────────────────────────────────

export type Envelope = {
  status: string;
  operation_id: string;
  result?: unknown;
  code?: string;
  message?: string;
};
/**
 * An envelope as the driver saw it. A `pending` envelope speaks about the attempt that just
 * failed ("nothing was sent: HTTP 521; toolgate will retry"), and a later attempt may still take
 * effect, so its claim is checked against the ledger as read after the envelope arrived: it is a
 * lie when an effect there was committed by a request at or before the last one a gateway answered
 * (the attempt the claim is about, or an earlier one). Effects of later requests (the scheduled
 * retry may already have run when the ledger is read) do not count.
 */
export function pendingClaimIsLie(ledger: UpstreamState): boolean {
  const claimed = ledger.requests.findLastIndex((r) => r.fault === "gateway");
  return ledger.effects.some((e) => claimed < 0 || e.request <= claimed);
}
export type Seen = Envelope & { liedWhenSeen?: boolean };
/** What the driver saw for one logical operation, plus the upstream ledger of its namespace. */
export type OpRecord = {
  label: string;
  kind: Kind;
  plan: OpPlan;
  operationId: string;
  /** Every envelope any response carried for this operation (posts, replays, polls). */
  seen: Seen[];
  final: { phase: string; result: Envelope };
  /** Upstream ledger for the operation's namespace (a read's re-proposal shares it). */
  ledger: UpstreamState;
};

/** Any text saying the call had no effect: allowed only when the upstream shows none. */
export const NOT_APPLIED =
  /did not take effect|nothing was sent|before it took effect|did not happen|not executed/i;
const DEFINITE_NON_SUCCESS = new Set(["rejected", "failed", "budget_exhausted", "cancelled"]);

export function violations(op: OpRecord): string[] {
  const out: string[] = [];
  const fail = (what: string) =>
    out.push(
      `${op.label} ${op.kind} ${op.operationId} [${op.plan.faults.map(faultName).join(", ")}]: ${what}`,
    );
  const effects = op.ledger.effects;
  const final = op.final.result;

  if (op.final.phase !== "recorded" && op.final.phase !== "outcome_unknown")
    fail(`stuck in ${op.final.phase}`);
  if (op.kind === "read") {
    if (effects.length > 0) fail(`a read committed ${effects.length} effects`);
    const answer = {
      id: String(op.plan.args.amount),
      status: "ok",
      path: `/orders/${op.plan.args.amount}`,
    };
    if (final.status === "succeeded" && !sameJson(final.result, answer))
      fail(
        `read result ${JSON.stringify(final.result)} is not the upstream's answer ${JSON.stringify(answer)}`,
      );
    return out;
  }

  if (effects.length > 1) fail(`${effects.length} effects for one operation (at most one allowed)`);
  const perKey = Object.entries(op.ledger.effectsByKey).filter(
    ([key, count]) => key !== "(none)" && count > 1,
  );
  for (const [key, count] of perKey) fail(`${count} effects for idempotency key ${key}`);
  if (final.status === "succeeded") {
    if (effects.length !== 1)
      fail(`succeeded with ${effects.length} upstream effects (exactly one required)`);
    const stored = effects[0] && {
      id: effects[0].id,
      status: "succeeded",
      ...(effects[0].body as object),
    };
    if (stored && !sameJson(final.result, stored))
      fail(
        `succeeded result ${JSON.stringify(final.result)} differs from the stored effect ${JSON.stringify(stored)}`,
      );
  }
  // "failed" etc. means definitely did not succeed; only invalid_output says it took effect.
  if (
    effects.length > 0 &&
    DEFINITE_NON_SUCCESS.has(final.status) &&
    final.code !== "invalid_output"
  ) {
    fail(
      `ended ${final.status}/${final.code} although the upstream committed ${effects[0]!.id}: ${final.message}`,
    );
  }
  const lie = op.seen.find(
    (seen) =>
      NOT_APPLIED.test(seen.message ?? "") &&
      (seen.status === "pending" ? seen.liedWhenSeen === true : effects.length > 0),
  );
  if (lie)
    fail(
      `told the model "${lie.message}" (${lie.status}/${lie.code}) although the upstream committed ${effects[0]?.id}${lie.status === "pending" ? " before that answer" : ""}`,
    );
  return out;
}

export const faultName = (fault: Fault): string => {
  switch (fault.kind) {
    case "status":
      return `status ${fault.status}${fault.commit ? "+commit" : ""}${fault.lookups ? " (lookups too)" : ""}`;
    case "hang":
      return `hang${fault.lookups ? " (lookups too)" : ""}`;
    case "gateway":
      return `gateway ${fault.status}`;
    case "slow":
      return `slow ${fault.delayMs > TIMEOUT_MS ? ">" : "<"}timeout`;
    default:
      return fault.kind;
  }
};

/** Key-order-insensitive equality for JSON values. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
      ? `{${Object.keys(value)
          .sort()
          .map(
            (key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`,
          )
          .join(",")}}`
      : JSON.stringify(value);

// ── counts ────────────────────────────────────────────────────────────────────────────────────

export type Tally = Record<string, number>;
export const bump = (tally: Tally, key: string, by = 1) =>
  void (tally[key] = (tally[key] ?? 0) + by);
export const showTally = (tally: Tally) =>
  Object.entries(tally)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, count]) => `${key}=${count}`)
    .join(" ");
