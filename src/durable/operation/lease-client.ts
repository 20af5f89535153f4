// The operation's side of its resource lock: acquire, start under the lease, release. The fencing
// token of the last grant is stored with the transition that starts an attempt under it (op_lease)
// and kept until pruning. Nothing here throws: a lock that does not answer is asked again by alarm.
// `firstSendChecks`: what a first send asks after a wait (a lock grant here, a quota slot too).
import {
  isSettled,
  LOCK_RECHECK_MS,
  WATCHDOG_GRACE_MS,
  type OperationEvent,
} from "../../domain/operation/index.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { lockStub } from "../stubs.ts";
import type { FrozenRow, Head, Secrets, Shell } from "./contracts.ts";
import {
  freezeCallFor,
  gather,
  grantLapsed,
  holdOf,
  prefetched,
  reliedGrant,
  usable,
} from "./gather.ts";
import { grantLapse } from "../../domain/grant.ts";
import { frozenBy, frozenDenial } from "../../domain/freeze.ts";
import { toolName, type OperationLog } from "./log.ts";

/** For a ResourceLockObject whose lease for this operation expired: does it still need it? */
export function holderStatus(head: Head | null): "active" | "waiting" | "settled" | "gone" {
  if (!head) return "gone";
  if (head.state.phase === "recorded") return "settled";
  // Only a person moves it on: the lock may ask far less often (domain/lock.ts PERSON_LEASE_MS).
  return isSettled(head.state) ? "waiting" : "active";
}

/** Asks the resource's lock for the lease (idempotent: the holder gets its token back). */
export async function acquireLock(shell: Shell): Promise<void> {
  const head = shell.log.head();
  const resource = head?.frozen.plan.resource;
  if (!head || !resource || head.state.phase !== "awaiting_lock") return;
  const leaseMs = Math.max(60_000, 2 * head.frozen.plan.timeoutMs + WATCHDOG_GRACE_MS);
  try {
    const reply = await lockStub(shell.env, head.frozen.tenant_id, resource).acquire({
      tenantId: head.frozen.tenant_id,
      resource,
      operationId: head.frozen.id,
      leaseMs,
    });
    if (!reply.ok) throw new Error(reply.error.code);
    if (reply.value.state === "held") await startUnderLease(shell, reply.value.fencingToken);
    else shell.apply({ type: "lock_queued", blockedBy: reply.value.blockedBy });
  } catch (error) {
    // Nothing was sent; the awaiting_lock alarm asks again.
    console.error("resource lock request failed; retrying by alarm", head.frozen.id, String(error));
  }
}

/**
 * The lease is ours: the first attempt may start. After waiting behind another write the run is
 * asked again first (scopes may have been revoked, the deadline passed, the run cancelled).
 */
export async function startUnderLease(shell: Shell, fencingToken: number): Promise<void> {
  const head = shell.log.head();
  if (!head) return;
  if (head.state.phase === "recorded") {
    shell.apply({ type: "lock_granted", fencingToken });
    return;
  }
  if (head.state.phase !== "awaiting_lock") return;
  const loaded = shell.log.loadFixed();
  const checked = await firstSendChecks(
    shell,
    head.frozen,
    head.state.blockedBy !== null,
    loaded.ok ? loaded.value.spec : null,
  );
  if (!checked.answered) {
    // Still awaiting_lock (holding the lease): the recheck re-acquires (same token) and asks again.
    console.error("lock granted, but the run could not be asked", head.frozen.id, checked.detail);
    shell.alarms.armAt(Date.now() + LOCK_RECHECK_MS);
    return;
  }
  // Held or refused before its first send: the lease goes straight back (hold: released by the arm).
  if (checked.stop) shell.apply(checked.stop);
  // Unanswered secrets: the attempt asks again itself (and ends `not_sent` if it cannot).
  else shell.apply({ type: "lock_granted", fencingToken }, checked.secrets);
}

type FirstSend =
  | { answered: false; detail: string }
  | { answered: true; stop: OperationEvent | null; secrets: Secrets | null };

/**
 * Before a first send that waited for something (its lock, its quota slot): the run's facts from
 * the submit while within their bound (no RPC) — their freezes decide. A wait that was long
 * (`waited`: behind another write, for a later slot), or facts past their bound, asks the run and
 * the tenant of the moment (scopes revoked, run cancelled, a freeze put since). `stop`: the event
 * that stops the send (denied, or a `hold` freeze); `secretsOf`: the send's secrets asked beside.
 */
export async function firstSendChecks(
  shell: Shell,
  frozen: FrozenRow,
  waited: boolean,
  secretsOf: ToolSpec | null,
): Promise<FirstSend> {
  const nowMs = Date.now();
  const facts = usable(shell.facts, nowMs);
  const asks = waited || facts === null;
  const frozenNow =
    !asks && facts.freezes.length > 0
      ? frozenBy(facts.freezes, freezeCallFor(shell.env, frozen), nowMs)
      : null;
  // A call a standing grant approved (issue 35): the grant must still stand at its first send —
  // the facts' grants, or the tenant's of the moment when it asks (below).
  const granted = reliedGrant(shell.log, frozen);
  const lapsedNow = !asks && granted ? grantLapse(facts.grants, granted, nowMs) : null;
  if (lapsedNow && granted)
    return { answered: true, stop: grantLapsed(granted, lapsedNow), secrets: null };
  if (frozenNow)
    return {
      answered: true,
      stop:
        frozenNow.mode === "refuse"
          ? { type: "denied", ...frozenDenial(frozenNow) }
          : { type: "hold", hold: holdOf(frozenNow)! },
      secrets: null,
    };
  const gathered = await gather(
    shell.env,
    frozen,
    {
      authorize: asks ? { tool: toolName(frozen) } : null,
      secretsOf,
      budget: null,
      // The run's facts from the submit (memory only): no TenantObject RPC while within the bound.
      facts: shell.facts,
    },
    nowMs,
  );
  const verdict = gathered.verdict;
  if (!verdict.answered) return verdict;
  const hold = holdOf(gathered.freeze);
  const stop: OperationEvent | null = !verdict.value.ok
    ? { type: "denied", ...verdict.value.error }
    : gathered.grantLapse && granted
      ? grantLapsed(granted, gathered.grantLapse)
      : hold
        ? { type: "hold", hold }
        : null;
  return { answered: true, stop, secrets: prefetched(gathered) };
}

/**
 * True once the lock confirmed. Nothing is written here: the `op_lease` row (the token of the last
 * grant) stays until pruning, which releases once more first (a no-op at the lock once released),
 * so a hot resource's handoff costs no extra commit per write.
 */
export async function releaseLock(env: Env, frozen: FrozenRow | undefined): Promise<boolean> {
  const resource = frozen?.plan.resource;
  if (!frozen || !resource) return true;
  try {
    const released = await lockStub(env, frozen.tenant_id, resource).release({
      tenantId: frozen.tenant_id,
      operationId: frozen.id,
    });
    // not_found: the lock has no row at all, so nothing is held there either.
    return released.ok || released.error.code === "not_found";
  } catch (error) {
    // The lock's lease expiry asks this operation, which answers "settled": released then.
    console.error(
      "resource lock release failed; the lease expiry will release it",
      frozen.id,
      String(error),
    );
    return false;
  }
}

/** The lease's fencing token, durable with the transition that starts the first attempt under it. */
export function recordLease(store: SqlStore, resource: string | null, fencingToken: number): void {
  store.ensureTable("op_lease");
  store.run(
    "INSERT OR REPLACE INTO op_lease (k, resource, fencing_token) VALUES (1, ?, ?)",
    resource ?? "",
    fencingToken,
  );
}

export function fencingToken(log: OperationLog): string | null {
  if (!log.head()?.frozen.plan.resource || !log.store.exists("op_lease")) return null;
  const row = log.store.one<{ fencing_token: number }>(
    "SELECT fencing_token FROM op_lease WHERE k = 1",
  );
  return row ? String(row.fencing_token) : null;
}

/** Ever granted a lease (then it is released again before the log goes). */
export function everLeased(store: SqlStore, frozen: FrozenRow): boolean {
  return (
    frozen.plan.resource !== null &&
    store.exists("op_lease") &&
    store.one("SELECT k FROM op_lease WHERE k = 1") !== null
  );
}
