// Sender: the attempt, lookup and preview I/O of one operation, and what memory alone can hold:
// whether this instance has a request in flight and how to abort it. Each request ends in exactly
// one event for apply(); nothing here throws, and `inFlight` is always cleared afterwards, so a
// request that died with a previous instance is found by the watchdog, never wedges the object.
import type { LookupObservation, Observation } from "../../domain/observation.ts";
import type { Exchange, OperationEvent } from "../../domain/operation/index.ts";
import { err } from "../../domain/result.ts";
import { configFor } from "../../config.ts";
import type { Env } from "../env.ts";
import { sendAttemptTraced, sendLookup, sendPreview, type Preview } from "../../tools/http-tool.ts";
import { routeOf } from "../../tools/shadow.ts";
import { budgetKeyFor, noteFirstAttempt } from "../retry-budget-client.ts";
import { afterAttempt as quotaAfterAttempt } from "./quota-client.ts";
import type { Loaded, Secrets } from "./contracts.ts";
import { ask, secretsFor, type Asked } from "./gather.ts";
import { fencingToken } from "./lease-client.ts";
import { askCredential, credentialRequired, NO_CREDENTIAL, withCredential } from "./credential.ts";
import type { OperationLog } from "./log.ts";
import { after402, payBeforeSend, settledRow, type ApplyWith, type Paying } from "./payment.ts";

export class Sender {
  inFlight: Promise<void> | null = null;
  private abort: AbortController | null = null;
  /** The approver's preview request, while it runs (bounded by the tool's timeout). */
  previewing: Promise<void> = Promise.resolve();

  constructor(
    private readonly env: Env,
    private readonly log: OperationLog,
    private readonly apply: ApplyWith,
  ) {}

  attempt(attempt: number, prefetched: Secrets | null): void {
    this.track(() => this.runAttempt(attempt, prefetched));
  }

  lookup(lookups: number): void {
    this.track(() => this.runLookup(lookups));
  }

  preview(): void {
    this.previewing = this.runPreview();
  }

  /**
   * A stored attempt or lookup that this instance is not running belongs to a previous instance
   * that died: classify it now (as the watchdog alarm would) instead of making callers wait.
   */
  recoverOrphan(): void {
    const phase = this.log.head()?.state.phase;
    if ((phase === "executing" || phase === "reconciling") && this.inFlight === null)
      this.apply({ type: "alarm", inFlight: false });
  }

  abortAttempt(): void {
    this.abort?.abort(new Error("cancelled"));
  }

  /**
   * Runs one request and always clears `inFlight` afterwards, so nothing can wedge the object: if
   * anything unforeseen throws, the watchdog alarm finds no request in flight and classifies it as
   * a crash. (`await` always yields first, so `running` is assigned before `finally` runs.)
   */
  private track(work: () => Promise<void>): void {
    let running: Promise<void> | null = null;
    running = (async () => {
      try {
        await work();
      } catch (error) {
        console.error(
          "operation request failed unexpectedly; the watchdog will classify it",
          error,
        );
      } finally {
        // A transition inside `work` may already have started the next request (a lookup).
        if (this.inFlight === running) this.inFlight = null;
      }
    })();
    this.inFlight = running;
  }

  /**
   * `prefetched`: the secrets fetched before the attempt row was written; an attempt started without
   * them fetches them here, before any byte is sent. A secret that is gone is a configuration
   * failure observed without sending: typed, never a throw. A tenant that does not answer is
   * `not_sent` (retried like any attempt that provably sent nothing).
   */
  private async runAttempt(attempt: number, prefetched: Secrets | null): Promise<void> {
    const loaded = this.log.loadFixed();
    const abort = new AbortController();
    this.abort = abort;
    let observation: Observation;
    let exchange: Exchange | undefined;
    try {
      const asked: Asked<Secrets> | null = !loaded.ok
        ? null
        : prefetched
          ? { answered: true, value: prefetched }
          : await ask(() =>
              secretsFor(this.env, this.log.head()!.frozen.tenant_id, loaded.value.spec),
            );
      const secrets = asked?.answered ? asked.value : null;
      // The user's token (issue 36), asked immediately before the send; none: the tool has no auth.
      const credential = secrets?.ok
        ? await askCredential(this.env, this.log.head()!.frozen)
        : NO_CREDENTIAL;
      if (credential.kind === "needs_consent") {
        // Nothing sent: attempt 1 gives its quota places back, as an attempt that ended would.
        quotaAfterAttempt(this.env, this.log.head()!.frozen, attempt, undefined);
        return void this.apply(await credentialRequired(this.env, this.log, attempt, credential));
      }
      // x402 (payment.ts): a paid tool's stored payload, or the one signature, stored before sending
      // (never signed for an attempt that cannot be sent for want of the user's token).
      const payment = loaded.ok ? loaded.value.spec.payment : null;
      const paying: Paying =
        payment && secrets?.ok && credential.kind !== "transient"
          ? await payBeforeSend(this.env, this.log, payment, attempt, secrets.value, this.apply)
          : { headers: null };
      observation = !loaded.ok
        ? { kind: "config_error", detail: loaded.error }
        : !asked?.answered
          ? {
              kind: "not_sent",
              detail: `toolgate could not read the tenant's secrets for this attempt (${asked?.detail ?? ""})`,
            }
          : !secrets!.ok
            ? { kind: "config_error", detail: secrets!.error }
            : credential.kind === "transient"
              ? { kind: "not_sent", detail: credential.detail }
              : "observation" in paying
                ? paying.observation
                : await sendAttemptTraced(loaded.value.spec, loaded.value.input, {
                    ...this.carried(loaded.value, withCredential(secrets!.value, credential)),
                    signal: abort.signal,
                    fencingToken: fencingToken(this.log),
                    payment: paying.headers,
                  }).then((sent) => {
                    exchange = sent.exchange;
                    return sent.observation;
                  });
    } catch (error) {
      // sendAttempt never throws by contract; if it does, the request may already have gone out.
      observation = {
        kind: "connection_lost",
        detail: `toolgate failed while handling the attempt: ${String(error)}`,
      };
    } finally {
      if (this.abort === abort) this.abort = null;
    }
    // Counted for the host's retry budget after the fact: nothing on the first attempt's path.
    const budget =
      attempt === 1 &&
      loaded.ok &&
      observation.kind !== "config_error" &&
      observation.kind !== "not_sent"
        ? budgetKeyFor(
            this.env,
            this.log.head()!.frozen.tenant_id,
            loaded.value.spec,
            loaded.value.input,
            routeOf(loaded.value.plan, loaded.value.spec),
          )
        : null;
    if (budget) noteFirstAttempt(this.env, budget, Date.now());
    // Quota shaping: attempt 1 frees its places under caps; an answer asking for a pause pauses the origin.
    quotaAfterAttempt(this.env, this.log.head()!.frozen, attempt, exchange);
    const spec = loaded.ok ? loaded.value.spec : null;
    const paid = spec?.payment
      ? await after402(
          this.env,
          this.log,
          { ...spec, payment: spec.payment },
          attempt,
          observation,
          exchange,
        )
      : null;
    if (paid) this.apply(paid.event, paid.frozen);
    else
      this.apply(
        { type: "attempt_finished", attempt, observation, exchange },
        spec?.payment ? settledRow(this.log, exchange) : undefined,
      );
  }

  private async runLookup(lookups: number): Promise<void> {
    const loaded = this.log.loadFixed();
    let observation: LookupObservation;
    try {
      const tenantSecrets = loaded.ok
        ? await secretsFor(this.env, this.log.head()!.frozen.tenant_id, loaded.value.spec)
        : null;
      // A lookup of a tool acting as the user asks with the user's token too (issue 36).
      const credential = tenantSecrets?.ok
        ? await askCredential(this.env, this.log.head()!.frozen)
        : NO_CREDENTIAL;
      const secrets: Secrets | null =
        tenantSecrets?.ok && credential.kind !== "none" && credential.kind !== "token"
          ? err(`the user's credential is not available for the lookup (${credential.kind})`)
          : tenantSecrets?.ok
            ? { ok: true, value: withCredential(tenantSecrets.value, credential) }
            : tenantSecrets;
      observation = !loaded.ok
        ? { kind: "inconclusive", detail: loaded.error }
        : !secrets!.ok
          ? { kind: "inconclusive", detail: secrets!.error }
          : await sendLookup(
              loaded.value.spec,
              loaded.value.input,
              this.carried(loaded.value, secrets!.value),
            );
    } catch (error) {
      observation = {
        kind: "inconclusive",
        detail: `toolgate failed while handling the lookup: ${String(error)}`,
      };
    }
    this.apply({ type: "lookup_finished", lookups, observation });
  }

  private async runPreview(): Promise<void> {
    const loaded = this.log.loadFixed();
    const tenantId = this.log.head()!.frozen.tenant_id;
    let preview: Preview = { status: null, body: null, detail: loaded.ok ? null : loaded.error };
    if (loaded.ok) {
      const { spec, input } = loaded.value;
      const asked = await ask(() => secretsFor(this.env, tenantId, spec));
      const secrets: Secrets = asked.answered
        ? asked.value
        : err("toolgate could not read the tenant's secrets for the preview");
      preview = secrets.ok
        ? await sendPreview(spec, input, this.carried(loaded.value, secrets.value))
        : { status: null, body: null, detail: secrets.error };
    }
    this.apply({ type: "preview_finished", preview });
  }

  /** What every request to the tool carries: the operation's key, the tenant's secrets, the deployment's config. */
  private carried(loaded: Loaded, secrets: Record<string, string>) {
    return {
      idempotencyKey: loaded.plan.idempotencyKey,
      // x402: a paid tool's lookup may ask the merchant by the payment's own id (`{payment_id}`).
      ...(loaded.spec.payment ? { paymentId: loaded.plan.payment?.paymentId ?? null } : {}),
      secrets,
      config: configFor(this.env, loaded.spec.configNames),
      // Where the request goes, from the frozen plan alone: a shadow operation never reaches production.
      route: routeOf(loaded.plan, loaded.spec),
    };
  }
}
