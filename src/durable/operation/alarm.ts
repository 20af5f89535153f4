// The operation's one alarm: set to the earlier of the state's own time (a retry, a watchdog, an
// expiry, pruning) and the oldest unacknowledged outbox row's redelivery, and what it does when it
// fires. Alarms are at-least-once, so the handler only acts on the state as it stands; before any
// automatic send it asks the run again (gather.ts), and whatever fails re-arms it with backoff.
import { nextDueAtMs, stateAlarmAtMs } from "../../domain/operation/index.ts";
import { backoffSinceMs } from "../../domain/retry-deferral.ts";
import { retentionMs } from "../../config.ts";
import { wakeForCredential } from "./credential.ts";
import type { Env } from "../env.ts";
import type { Secrets, Shell } from "./contracts.ts";
import { gather, gatherAlarmSend } from "./gather.ts";
import { toolName, type OperationLog } from "./log.ts";
import { outboxDueAtMs, outboxPending, type OperationOutbox } from "./notices.ts";
import { RECEIPT_RECOVERY_MS, type Receipts } from "./receipts.ts";
import { retire } from "./retention.ts";
import type { Sender } from "./send.ts";

export class Alarms {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly log: OperationLog,
    private readonly env: Env,
    /** A settled operation lacks a receipt (receipts.ts): the alarm comes for it (RECEIPT_RECOVERY_MS). */
    private readonly receiptPending: () => boolean = () => false,
  ) {}

  /**
   * Sets the alarm to `atMs` (null: none), or earlier when an outbox row is due for redelivery
   * before it: every alarm the operation sets goes through here, so none can drop a redelivery.
   */
  armAt(atMs: number | null): void {
    const outboxAtMs = outboxDueAtMs(this.log);
    const at = atMs === null ? outboxAtMs : outboxAtMs === null ? atMs : Math.min(atMs, outboxAtMs);
    void (at === null ? this.storage.deleteAlarm() : this.storage.setAlarm(at));
  }

  /** Back to the state's own alarm, or the next redelivery if that comes first. */
  rearm(): void {
    this.armAt(this.ownAlarmAtMs());
  }

  /** When the current state's own alarm is due (a recorded operation's: its pruning). */
  ownAlarmAtMs(): number | null {
    const head = this.log.head();
    if (!head) return null;
    if (head.state.phase !== "recorded")
      return stateAlarmAtMs(head.state, head.frozen.plan, Date.now());
    const pruneAtMs = head.state.recordedAtMs + retentionMs(this.env);
    // Its receipt is signed in the background right after the commit; lost to a crash, the alarm
    // signs it then (and, at the latest, before pruning: runAlarm).
    return this.receiptPending()
      ? Math.min(pruneAtMs, head.state.recordedAtMs + RECEIPT_RECOVERY_MS)
      : pruneAtMs;
  }

  /** An alarm whose work failed comes back after as long as the state has stood (5 s–10 min). */
  fallbackDelayMs(): number {
    const nowMs = Date.now();
    return backoffSinceMs(this.log.lastAtMs() ?? nowMs, nowMs);
  }
}

/** What the alarm handler needs of its object: the background work it queues and waits for. */
export type AlarmHost = Shell & {
  sender: Sender;
  /** The outbox (notices.ts): drain() queues both sends, settled() waits for the inbox's. */
  outbox: OperationOutbox;
  /** Its signed receipts: the alarm produces any due and missing before anything else of a recorded one. */
  receipts: Receipts;
  lockWork(): Promise<void>;
};

export async function runAlarm(host: AlarmHost): Promise<void> {
  const { alarms, sender } = host;
  const shell: Shell = host;
  const log = shell.log;
  if (!log.head()) return;
  // Outbox rows the tenant has not acknowledged go first. An alarm that came for them while the
  // state's own time is still ahead (a retry due later) does nothing else: no early retry.
  if (outboxPending(log)) {
    alarms.armAt(Date.now() + alarms.fallbackDelayMs());
    await host.outbox.drain();
    const due = nextDueAtMs(log.head()!.state);
    if (due !== null && due > Date.now()) return;
  }
  const head = log.head()!;
  if (head.state.phase === "recorded") {
    const signed = await host.receipts.produce();
    if (!signed.ok) return alarms.armAt(Date.now() + alarms.fallbackDelayMs());
    return retire(shell, head.frozen, head.state);
  }
  if (head.state.phase === "held") return wakeHeld(host);
  // Waiting for the user to connect (issue 36): the recheck asks the connection first.
  if (head.state.phase === "awaiting_credential") {
    alarms.armAt(Date.now() + alarms.fallbackDelayMs());
    return wakeForCredential(host);
  }
  if (head.state.phase === "awaiting_lock") {
    // A waiter asks the run on each recheck: it stops at the run's deadline or cancel instead of
    // queueing for ever. Unanswered: it keeps waiting (the recheck below is armed either way).
    alarms.armAt(Date.now() + alarms.fallbackDelayMs());
    const want = { authorize: { tool: toolName(head.frozen) }, secretsOf: null, budget: null };
    const { verdict } = await gather(shell.env, head.frozen, want, Date.now());
    if (verdict.answered && !verdict.value.ok) {
      shell.apply({ type: "denied", ...verdict.value.error });
      await host.lockWork();
      return;
    }
  }
  // Before a retry or a resend, ask the run whether this may still execute (gatherAlarmSend).
  const sends =
    head.state.phase === "retry_scheduled" ||
    (head.state.phase === "outcome_unknown" && head.state.reconcile === "resend");
  let secrets: Secrets | null = null;
  if (sends) {
    const nowMs = Date.now();
    // Armed before the first await: whatever happens to the questions below (a throw, a hang, the
    // object dying), this alarm comes back by itself. The transition below overwrites it.
    alarms.armAt(nowMs + alarms.fallbackDelayMs());
    const prepared = await gatherAlarmSend(shell.env, log, head, nowMs);
    if (prepared.instead) {
      shell.apply(prepared.instead);
      await sender.inFlight;
      return;
    }
    secrets = prepared.secrets;
  }
  shell.apply({ type: "alarm", inFlight: sender.inFlight !== null }, secrets);
  await Promise.all([host.outbox.settled(), host.lockWork()]);
  // Keep this event open while the attempt it started runs, so the object stays alive for it.
  await sender.inFlight;
}

/**
 * OperationObject.alarm. Never left to the platform's retries of a throwing alarm (a few, over
 * about two minutes): if anything here fails, the alarm is set again with backoff and the error
 * only logged.
 */
export async function alarmOrRearm(host: AlarmHost): Promise<void> {
  try {
    await runAlarm(host);
  } catch (error) {
    console.error("operation alarm failed; it runs again by itself", String(error));
    host.alarms.armAt(Date.now() + host.alarms.fallbackDelayMs());
  }
}

/**
 * A held operation's recheck, or the tenant's wake after a lift (issue 34): a pause waits for a
 * person; a freeze's hold asks the run, the freezes of the moment, the secrets and the host's retry
 * budget (so a lift releases its operations at the pace the upstream's budget allows, never as one
 * herd) and sends only if all say so. Still frozen: it asks again later by itself.
 */
export async function wakeHeld(host: AlarmHost): Promise<void> {
  const { log, alarms } = host;
  const head = log.head();
  if (head?.state.phase !== "held") return;
  if (head.state.hold.kind === "pause") return alarms.rearm();
  const nowMs = Date.now();
  // Armed before the first await: whatever happens below, the recheck comes back by itself.
  alarms.armAt(nowMs + alarms.fallbackDelayMs());
  const prepared = await gatherAlarmSend(host.env, log, head, nowMs);
  const instead = prepared.instead;
  if (instead?.type === "hold" && instead.hold.freezeId === head.state.hold.freezeId)
    host.apply({ type: "alarm", inFlight: false });
  else if (instead) host.apply(instead);
  else host.apply({ type: "release", of: "freeze", by: "lift" }, prepared.secrets);
  await Promise.all([host.outbox.settled(), host.lockWork()]);
  await host.sender.inFlight;
}
