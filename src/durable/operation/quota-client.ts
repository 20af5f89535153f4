// The operation's side of quota shaping (issue 34 item 4): the first attempt asks every quota its
// plan froze (domain/quota/definition.ts QuotaClaim) for a slot keyed by (operation id, attempt 1),
// so an RPC asked again is granted once; the answers combine into one `quota_answered` (the latest
// slot, any wait, or the deadline). An object that cannot be asked fails closed: the operation keeps
// waiting and asks again by its alarm. After the first attempt its places under a cap are given back
// (an operation that dies holding one loses it by expiry). And an upstream's answer that asks for a
// pause (domain/quota/upstream.ts) pauses its origin for every operation of the tenant: at the origin's
// object (first attempts and retries ask it) and at the tenant (the run's facts carry it to new calls).
import type { QuotaAnswer } from "../../domain/quota/slots.ts";
import { upstreamPause } from "../../domain/quota/upstream.ts";
import type { Exchange } from "../../domain/operation/index.ts";
import { firstAsk, WATCHDOG_GRACE_MS } from "../../domain/operation/steps.ts";
import type { Env } from "../env.ts";
import { budgetStub, tenantStub } from "../stubs.ts";
import type { FrozenRow, Shell } from "./contracts.ts";
import { firstSendChecks } from "./lease-client.ts";

/** Until a recheck, when a quota object could not be asked. */
const UNANSWERED_WAIT_MS = 5_000;

const grantOf = (frozen: FrozenRow) => `${frozen.id}:1`;

export async function acquireQuota(shell: Shell): Promise<void> {
  const head = shell.log.head();
  const claims = head?.frozen.plan.quotas ?? [];
  if (!head || head.state.phase !== "awaiting_quota" || claims.length === 0) return;
  const { frozen } = head;
  const nowMs = Date.now();
  let answers: QuotaAnswer[];
  try {
    answers = await Promise.all(
      claims.map((claim) =>
        budgetStub(shell.env, claim.object).acquireQuota({
          grant: grantOf(frozen),
          operationId: frozen.id,
          claim,
          nowMs,
          deadlineAtMs: frozen.plan.deadlineAtMs ?? null,
          holdMs: 2 * frozen.plan.timeoutMs + WATCHDOG_GRACE_MS,
        }),
      ),
    );
  } catch (error) {
    // Fail closed: nothing is sent; the wait goes on and asks again.
    answers = [
      {
        kind: "wait",
        untilMs: nowMs + UNANSWERED_WAIT_MS,
        reason: "rate",
        long: false,
        detail: `toolgate could not ask the quota (${String(error)}); nothing was sent`,
      },
    ];
  }
  const answer = combine(answers);
  if (answer.kind === "granted" && answer.atMs <= nowMs) {
    // A send point (issue 34): a freeze put, a scope revoked or the run cancelled while it waited
    // stops it here; a slot granted on the first ask is checked on the run's facts (no RPC).
    const checked = await firstSendChecks(shell, frozen, !firstAsk(head.state), null);
    if (!checked.answered) {
      // Fail closed: its grant stays; asked again shortly, nothing sent meanwhile.
      const detail = `toolgate could not ask whether it may still be sent (${checked.detail}); nothing was sent`;
      const untilMs = nowMs + UNANSWERED_WAIT_MS;
      const wait = { kind: "wait", untilMs, reason: "rate", long: false, detail } as const;
      shell.apply({ type: "quota_answered", answer: wait });
      return;
    }
    if (checked.stop) {
      shell.apply(checked.stop);
      return;
    }
  }
  shell.apply({ type: "quota_answered", answer });
}

/** All granted: the latest slot; else the first deadline, else the longest wait. */
function combine(answers: QuotaAnswer[]): QuotaAnswer {
  const deadline = answers.find((a) => a.kind === "deadline");
  if (deadline) return deadline;
  const waits = answers.filter((a) => a.kind === "wait");
  if (waits.length > 0)
    return waits.reduce((a, b) =>
      a.untilMs === null ? a : b.untilMs === null || b.untilMs > a.untilMs ? b : a,
    );
  return {
    kind: "granted",
    atMs: Math.max(...answers.map((a) => (a.kind === "granted" ? a.atMs : 0))),
  };
}

/** The origin the request went to (a secret never names a host, so its masked URL has the real one). */
function originOfUrl(url: string | undefined): string | null {
  try {
    return url ? new URL(url).origin : null;
  } catch {
    return null;
  }
}

const quiet = (work: Promise<unknown>) => void work.catch(() => {});

/**
 * Gives back its places under caps, and its places in their queues (fire-and-forget; expiry covers
 * a loss). `unsent`: it stopped waiting with nothing sent (recorded, or held by a freeze or a
 * pause): every quota forgets its grant, so asked again after a hold it takes a new slot and place.
 */
export function withdrawQuota(env: Env, frozen: FrozenRow, unsent = false): void {
  for (const claim of frozen.plan.quotas ?? [])
    if (unsent || claim.concurrency !== undefined)
      quiet(budgetStub(env, claim.object).releaseQuota(grantOf(frozen), Date.now(), unsent));
}

/**
 * After an attempt: attempt 1 gives back its places under concurrency caps; any answer asking for
 * a pause pauses its origin. Fire-and-forget: a lost release is freed by expiry, a lost pause
 * costs the next call one more refused request.
 */
export function afterAttempt(
  env: Env,
  frozen: FrozenRow,
  attempt: number,
  exchange: Exchange | undefined,
): void {
  const nowMs = Date.now();
  if (attempt === 1) withdrawQuota(env, frozen);
  const answer = exchange?.response;
  const origin = originOfUrl(exchange?.request?.url);
  if (!answer || origin === null) return;
  const header = (name: string) => answer.headers[name] ?? null;
  const pause = upstreamPause(
    answer.status,
    {
      retryAfter: header("retry-after"),
      rateLimit: header("ratelimit"),
      rateLimitPolicy: header("ratelimit-policy"),
    },
    nowMs,
  );
  if (!pause) return;
  quiet(
    budgetStub(env, `${frozen.tenant_id}:${origin}`).pauseOrigin(
      pause.untilMs,
      pause.detail,
      nowMs,
    ),
  );
  quiet(tenantStub(env, frozen.tenant_id).noteOriginPause(frozen.tenant_id, origin, pause.untilMs));
}
