// How operations use their host's retry budget (RetryBudgetObject) without ever depending on it.
// First attempts are only counted, never asked: a per-isolate tally per budget key, reported after
// the attempt with a fire-and-forget RPC at most once per second per key (the rest rides along
// with the next report or the next retry's request). An automatic retry asks `spend`; a budget
// object that throws, is unreachable or is slow (SPEND_TIMEOUT_MS) grants the retry: the budget
// only damps an outage, it must never wedge an operation.
import type { RetryVerdict } from "../domain/retry-budget.ts";
import type { SpendVerdict } from "./retry-budget-object.ts";
import type { FreezeCall } from "../domain/freeze.ts";
import type { FrozenInput } from "../domain/turn/turn.ts";
import { configFor, retryBudgetConfig } from "../config.ts";
import type { Env } from "./env.ts";
import type { SendRoute, ToolSpec } from "../tools/spec.ts";
import { sandboxed } from "../tools/shadow.ts";
import { budgetStub } from "./stubs.ts";

export const SPEND_TIMEOUT_MS = 1_000;
const FLUSH_EVERY_MS = 1_000;
const MAX_TALLIES = 10_000;
const GRANTED: RetryVerdict = { ok: true };

/**
 * The budget key of the host `spec` sends `input` to: the URL's origin with the tenant. Built with
 * placeholder secrets (a secret never names a host), so it needs no secret and sends nothing.
 * Null when the deployment has the budget off or no URL can be built (then nothing is budgeted).
 * `route`: where the operation's requests go (a shadow operation's sandbox is its own host, and a
 * fixed sandbox result none: a shadow run never spends or counts against production's budget).
 */
export function budgetKeyFor(
  env: Env,
  tenantId: string,
  spec: ToolSpec,
  input: FrozenInput,
  route: SendRoute,
): string | null {
  if (!retryBudgetConfig(env)) return null;
  const origin = originOf(env, spec, input, route);
  return origin === null ? null : `${tenantId}:${origin}`;
}

/**
 * The upstream origin `spec` sends `input` to on `route`, built with placeholder secrets (a secret
 * never names a host; nothing sent); null when none can be built or a shadow run's fixed sandbox
 * result sends nothing. What the retry budget and quotas are keyed by and what a freeze on an
 * origin compares (issue 34).
 */
export function originOf(
  env: Env,
  spec: ToolSpec,
  input: FrozenInput,
  route: SendRoute,
): string | null {
  try {
    const built = spec.buildRequest(input, {
      idempotencyKey: "budget",
      secrets: Object.fromEntries(spec.secretNames.map((name) => [name, "x"])),
      config: configFor(env, spec.configNames),
    });
    if ("error" in built) return null;
    const routed = sandboxed(built, route);
    return "send" in routed ? new URL(routed.send.url).origin : null;
  } catch {
    return null;
  }
}

/** First attempts sent but not yet reported, per budget key, in this isolate. */
const tallies = new Map<string, { pending: number; reportedAtMs: number }>();

function takePending(key: string): number {
  const tally = tallies.get(key);
  if (!tally) return 0;
  const pending = tally.pending;
  tally.pending = 0;
  return pending;
}

/** Counts one first attempt to `key`'s host; never awaited, never fails the caller. */
export function noteFirstAttempt(env: Env, key: string, nowMs: number): void {
  if (!tallies.has(key) && tallies.size >= MAX_TALLIES)
    for (const [stale, tally] of tallies) if (tally.pending === 0) tallies.delete(stale);
  const tally = tallies.get(key) ?? { pending: 0, reportedAtMs: -Infinity };
  tally.pending += 1;
  tallies.set(key, tally);
  if (nowMs - tally.reportedAtMs < FLUSH_EVERY_MS) return;
  tally.reportedAtMs = nowMs;
  const count = takePending(key);
  try {
    void budgetStub(env, key)
      .noteFirsts(count, nowMs)
      .catch(() => {});
  } catch {
    // A budget that cannot be reached only forgets these first attempts (fewer retries allowed).
  }
}

/**
 * Asks `key`'s object for one automatic retry: the upstream's pause of the origin (issue 34), and
 * the budget when the deployment has it on; granted whenever the object cannot answer in time (a
 * pause missed then costs one more refused request, which pauses again).
 */
export async function askRetryBudget(env: Env, key: string, nowMs: number): Promise<SpendVerdict> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<SpendVerdict>((resolve) => {
      timer = setTimeout(() => {
        console.error(
          JSON.stringify({
            level: "warn",
            event: "toolgate.retry_budget_unavailable",
            detail: `no answer within ${SPEND_TIMEOUT_MS} ms`,
          }),
        );
        resolve(GRANTED);
      }, SPEND_TIMEOUT_MS);
    });
    const budgetOn = retryBudgetConfig(env) !== null;
    return await Promise.race([
      budgetStub(env, key).spend(nowMs, takePending(key), budgetOn),
      timeout,
    ]);
  } catch (error) {
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.retry_budget_unavailable",
        detail: String(error),
      }),
    );
    return GRANTED;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A call as a freeze is asked about it (domain/freeze.ts): its tool, the origin its request goes
 * to on its route (a shadow write's sandbox, never production's), its user and run, and whether it
 * writes.
 */
export function freezeCallOf(
  env: Env,
  spec: ToolSpec,
  input: FrozenInput,
  route: SendRoute,
  user: string,
  run: string,
): FreezeCall {
  return {
    tool: spec.name,
    origin: originOf(env, spec, input, route),
    user,
    run,
    write: spec.risk !== "read",
  };
}
