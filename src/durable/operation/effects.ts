// The effects of one committed transition, in the order the core returned them (the `perform` half
// of OperationObject.apply, as in resource-lock-object.ts). Called right after the transaction with
// no await before or inside it: each effect starts its I/O and returns, so a send leaves only once
// its attempt row is committed (the output gate holds it until then). Outbox rows were written in
// the transaction; apply delivers them after this.
import type { Effect, OperationState } from "../../domain/operation/index.ts";
import type { AlarmHost } from "./alarm.ts";
import type { Secrets } from "./contracts.ts";
import { acquireLock, releaseLock } from "./lease-client.ts";
import { acquireQuota, withdrawQuota } from "./quota-client.ts";

/** The object's lock queue besides what the alarm uses: lock requests and releases run in order. */
export type EffectHost = AlarmHost & { queueLock(work: () => Promise<void>): void };

/** True when an effect set or cleared the alarm (else apply re-arms it for a redelivery). */
export function perform(
  host: EffectHost,
  effects: Effect[],
  state: OperationState,
  secrets: Secrets | null,
): boolean {
  let armed = false;
  for (const effect of effects) {
    switch (effect.kind) {
      case "set_alarm":
        host.alarms.armAt(effect.atMs);
        armed = true;
        break;
      case "clear_alarm":
        // Nothing more will happen by itself; a recorded operation's only alarm is its pruning
        // (or, sooner, its receipt's signing should the background one not happen: alarm.ts).
        host.alarms.armAt(state.phase === "recorded" ? host.alarms.ownAlarmAtMs() : null);
        armed = true;
        break;
      case "send_attempt":
        host.sender.attempt(effect.attempt, secrets);
        break;
      case "abort_attempt":
        host.sender.abortAttempt();
        break;
      case "send_lookup":
        host.sender.lookup(effect.lookups);
        break;
      case "inbox":
      case "route":
      case "needs_person":
      case "release_limits":
        // Written to the outbox inside the transaction; apply delivers them after this.
        break;
      case "send_preview":
        host.sender.preview();
        break;
      case "acquire_quota":
        void acquireQuota(host);
        break;
      case "release_quota": {
        const frozen = host.log.head()?.frozen;
        if (frozen) withdrawQuota(host.env, frozen, true);
        break;
      }
      case "acquire_lock":
        host.queueLock(() => acquireLock(host));
        break;
      case "release_lock":
        host.queueLock(async () => void (await releaseLock(host.env, host.log.head()?.frozen)));
        break;
    }
  }
  return armed;
}
