// TenantObject: one per tenant, the RPC surface over its record and alarm (record.ts) and the modules
// beside it: API keys (keys.ts), upstream secrets (secrets.ts), the tool registry and its verdicts
// (registry.ts), tenant facts (facts.ts), receipt signing keys (receipt-keys.ts), the approvals inbox and unknown-outcomes list (inbox.ts),
// events (events.ts), passkeys for step-up approvals (passkeys.ts), delegations while away (delegations.ts), webhooks and their delivery logs, and the list of its runs an index rebuild
// walks (runs.ts). Every method only delegates; names and signatures are the contract other
// objects and routes call through stubs.
import { DurableObject } from "cloudflare:workers";
import { err, ok, type Result } from "../../domain/result.ts";
import type {
  Verification,
  VerificationStatus,
  VerificationView,
} from "../../domain/verification.ts";
import type { ApiScope } from "../../http/schemas.ts";
import type { ToolSource } from "../../tools/spec.ts";
import type { EventType, ToolgateEvent } from "../../domain/journal/events.ts";
import type { Env } from "../env.ts";
import { SqlStore } from "../store/sql-store.ts";
import { TENANT_SCHEMA, tenantRecord } from "../store/tenant-rows.ts";
import type { PolicySet } from "../../domain/policy-request.ts";
import type { TenantError } from "./contracts.ts";
import * as policies from "./policies.ts";
import type { PolicySetInvalid } from "./policies.ts";
import * as quotas from "./quotas.ts";
import type { QuotaDefinition } from "../../domain/quota/definition.ts";
import * as stored from "./events.ts";
import { Inbox, type ApprovalItem, type ApprovalPage, type UnknownItem } from "./inbox.ts";
import { readFacts, runTools, startFacts, type RunTools, type StartFacts } from "./facts.ts";
import * as keys from "./keys.ts";
import * as passkeys from "./passkeys.ts";
import * as delegations from "./delegations.ts";
import * as registry from "./registry.ts";
import * as secrets from "./secrets.ts";
import * as receiptKeys from "./receipt-keys.ts";
import * as webhooks from "./webhooks.ts";
import * as runEndpoints from "./run-endpoints.ts";
import * as runs from "./runs.ts";
import * as deliveries from "./webhook-deliveries.ts";
import type { DeliveryRecord } from "./webhook-deliveries.ts";
import { notificationStates, type NotificationState } from "./notifications.ts";
import { initTenant, tenantAlarm, type TenantCreated } from "./record.ts";
import { retentionMs } from "../../config.ts";
import { OUTBOX_RETRY_MS } from "../outbox/outbox.ts";
import * as freezes from "./freezes.ts";
import * as tripwires from "./tripwires.ts";
import * as grants from "./grants.ts";
import * as oauthProviders from "./oauth-providers.ts";
import type { OAuthProviderBody, ProviderEndpoints } from "../../domain/credential.ts";
import type { Tripwire } from "../../domain/tripwire.ts";
import type { Grant } from "../../domain/grant.ts";
import type { Freeze } from "../../domain/freeze.ts";
import type { GrantUseItem, HeldItem } from "../../domain/journal/announce.ts";

export type { RunTools } from "./facts.ts";
export type { TenantError } from "./contracts.ts";

export class TenantObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, TENANT_SCHEMA);
  private readonly inbox = new Inbox(this.store, this.ctx.storage, this.env);

  async init(tenantId: string, name: string): Promise<Result<TenantCreated, TenantError>> {
    return initTenant(this.store, tenantId, name);
  }

  /** Retention: the inbox's and unknown-outcomes list's closed rows, events, runs' notify endpoints. */
  override async alarm(): Promise<void> {
    return tenantAlarm(this.store, this.ctx.storage, this.env, this.inbox, () =>
      freezes.freezeAlarm(this.store, this.env, tenantRecordId(this.store)),
    );
  }

  // ── API keys (keys.ts) ───────────────────────────────────────────────────────────────────────

  async issueKey(
    tenantId: string,
    name: string,
    scopes: ApiScope[],
  ): Promise<Result<keys.IssuedKey, TenantError>> {
    return keys.issueKey(this.store, tenantId, name, scopes);
  }

  async revokeKey(keyId: string): Promise<Result<true, TenantError>> {
    return keys.revokeKey(this.store, keyId);
  }

  async verifyKey(keyId: string, secret: string): Promise<Result<keys.KeyInfo, TenantError>> {
    return keys.verifyKey(this.store, keyId, secret);
  }

  /** A key that is still valid (not revoked): its name and scopes. The console re-checks it on every request. */
  async keyInfo(keyId: string): Promise<Result<keys.KeyInfo, TenantError>> {
    return keys.keyInfo(this.store, keyId);
  }

  // ── Passkeys for step-up approvals (passkeys.ts) ───────────────────────────────────────────

  async addPasskey(passkey: passkeys.StoredPasskey): Promise<Result<true, TenantError>> {
    return passkeys.addPasskey(this.store, passkey);
  }

  async passkey(credentialId: string): Promise<passkeys.StoredPasskey | null> {
    return passkeys.passkeyOf(this.store, credentialId);
  }

  async passkeysOf(person: string): Promise<passkeys.StoredPasskey[]> {
    return passkeys.passkeysOf(this.store, person);
  }

  /** false: the counter had already moved past `seen` (a replayed assertion). */
  async advancePasskey(credentialId: string, seen: number, counter: number): Promise<boolean> {
    return passkeys.advancePasskey(this.store, credentialId, seen, counter);
  }

  // ── Delegation while away (delegations.ts, issue 35) ────────────────────────────────────────

  async putDelegation(delegation: delegations.Delegation): Promise<void> {
    this.store.ensureSchema();
    delegations.putDelegation(this.store, delegation);
  }

  async endDelegation(from: string): Promise<boolean> {
    this.store.ensureSchema();
    return delegations.endDelegation(this.store, from);
  }

  async listDelegations(): Promise<delegations.Delegation[]> {
    this.store.ensureSchema();
    return delegations.listDelegations(this.store);
  }

  async delegationFor(from: string, to: string): Promise<delegations.Delegation | null> {
    this.store.ensureSchema();
    return delegations.delegationFor(this.store, from, to, Date.now());
  }

  // ── Tool registry and verdicts (registry.ts) ─────────────────────────────────────────────────

  /** `force`: a change that breaks the Cedar policy set is stored and the set marked invalid. */
  async putTool(
    name: string,
    manifest: unknown,
    force = false,
  ): Promise<Result<registry.ToolRecord & { created: boolean }, TenantError>> {
    return registry.putTool(this.store, this.env, name, manifest, force);
  }

  async getTool(name: string): Promise<Result<registry.ToolRecord, TenantError>> {
    return registry.getTool(this.store, name);
  }

  /** The list shows each verdict without its evidence (GET /v1/tools/{name} has the exchanges). */
  async listTools(): Promise<registry.ToolRecord[]> {
    return registry.listTools(this.store);
  }

  async deleteTool(
    name: string,
    force = false,
  ): Promise<Result<{ warnings: PolicySetInvalid[] }, TenantError>> {
    return registry.deleteTool(this.store, this.env, name, force);
  }

  /** Stores a verdict only if the tool still has the settings it was checked with. */
  async recordVerification(
    name: string,
    verification: Verification,
  ): Promise<Result<VerificationView, TenantError>> {
    return registry.recordVerification(this.store, name, verification);
  }

  /** Asked when an operation is created and when a run exports its tools: the verdict for exactly these settings. */
  async verificationStatuses(
    items: Array<{ name: string; settingsHash: string }>,
  ): Promise<Record<string, VerificationStatus>> {
    return registry.storedStatuses(this.store, items);
  }

  /** A new operation's tenant facts, one read: the tools' verdicts and the Cedar policy set (issue 21). */
  async startFacts(items: Array<{ name: string; settingsHash: string }>): Promise<StartFacts> {
    return startFacts(this.store, items);
  }

  /** The Cedar policy set (policies.ts): stored after Cedar validated it; read before each attempt. */
  async putPolicies(
    text: string,
  ): Promise<Result<policies.PolicyRecord & { created: boolean }, TenantError>> {
    return policies.putPolicies(this.store, this.env, text);
  }
  async getPolicies(): Promise<policies.PolicyRecord | null> {
    return policies.getPolicies(this.store, this.env);
  }
  async deletePolicies(): Promise<Result<true, TenantError>> {
    return policies.deletePolicies(this.store);
  }
  async policySet(): Promise<PolicySet | null> {
    return policies.policySetOf(this.store);
  }

  /** OAuth providers (issue 36, oauth-providers.ts): the client secret sealed, write-only. */
  async putOauthProvider(
    tenantId: string,
    id: string,
    body: OAuthProviderBody,
    endpoints: ProviderEndpoints,
  ) {
    return oauthProviders.putProvider(this.store, this.env, tenantId, id, body, endpoints);
  }
  async listOauthProviders() {
    return oauthProviders.listProviders(this.store);
  }
  async getOauthProvider(id: string) {
    return oauthProviders.getProvider(this.store, id);
  }
  async deleteOauthProvider(id: string, force = false) {
    return oauthProviders.deleteProvider(this.store, id, force);
  }
  /** For one protocol step of this tenant's credential objects only: the client secret opened. */
  async oauthProviderForUse(tenantId: string, id: string) {
    return oauthProviders.providerForUse(this.store, this.env, tenantId, id);
  }

  /** Quotas (issue 34 item 4, quotas.ts): definitions by id, and the origins upstreams paused. */
  async putQuota(id: string, definition: QuotaDefinition) {
    return quotas.putQuota(this.store, id, definition);
  }
  async listQuotas(): Promise<quotas.QuotaRecord[]> {
    return quotas.storedQuotas(this.store);
  }
  async deleteQuota(id: string): Promise<Result<true, TenantError>> {
    return quotas.deleteQuota(this.store, id);
  }
  async noteOriginPause(tenantId: string, origin: string, untilMs: number): Promise<void> {
    if (tenantRecord(this.store)?.id === tenantId)
      quotas.noteOriginPause(this.store, origin, untilMs);
  }

  // ── Freezes (freezes.ts, issue 34) ───────────────────────────────────────────────────────────

  /**
   * Before every send after an operation's start: the Cedar set and the freezes of the moment, in
   * the one read that asked for the set alone before (gather.ts policyVerdict).
   */
  async sendChecks(): Promise<{ policies: PolicySet | null; freezes: Freeze[]; grants: Grant[] }> {
    const nowMs = Date.now();
    return {
      policies: policies.policySetOf(this.store),
      freezes: freezes.liveFreezes(this.store, nowMs),
      // The live grants (issue 35): a call that relied on one not among them falls back to a person.
      grants: grants.liveGrants(this.store, nowMs),
    };
  }
  async putFreeze(tenantId: string, freeze: Freeze) {
    return freezes.putFreeze(this.store, this.ctx.storage, this.env, tenantId, freeze);
  }
  async deleteFreeze(tenantId: string, id: string, by: string) {
    const lifted = await freezes.deleteFreeze(
      this.store,
      this.ctx.storage,
      this.env,
      tenantId,
      id,
      by,
    );
    // A tripwire's freeze: its counter re-arms (tripwires.ts).
    if (lifted) await tripwires.untripCounter(this.env, tenantId, lifted.freeze);
    return lifted;
  }
  async listFreezes() {
    return freezes.listFreezes(this.store, Date.now());
  }
  // ── Standing grants (grants.ts, issue 35) ────────────────────────────────────────────────────

  async createGrant(tenantId: string, grant: Grant) {
    return this.announcing(grants.createGrant(this.store, this.env, tenantId, grant));
  }
  async confirmGrant(tenantId: string, id: string, by: string) {
    return this.announcing(grants.confirmGrant(this.store, this.env, tenantId, id, by));
  }
  async grantSettings(): Promise<Result<grants.GrantSettings, TenantError>> {
    if (!tenantRecord(this.store)) return err({ code: "not_found", detail: "no such tenant" });
    return ok(grants.grantSettings(this.store));
  }
  async putGrantSettings(
    settings: grants.GrantSettings,
  ): Promise<Result<grants.GrantSettings, TenantError>> {
    if (!tenantRecord(this.store)) return err({ code: "not_found", detail: "no such tenant" });
    return ok(grants.putGrantSettings(this.store, settings));
  }
  async revokeGrant(tenantId: string, id: string, by: string) {
    return this.announcing(grants.revokeGrant(this.store, this.env, tenantId, id, by));
  }
  async listGrants() {
    return grants.listGrants(this.store);
  }
  async showGrant(tenantId: string, id: string) {
    return grants.showGrant(this.store, this.env, tenantId, id);
  }
  /** Delivered by operations from their outbox: a call a grant let through, chained once. */
  async recordGrantUse(item: GrantUseItem): Promise<void> {
    const tenant = tenantRecord(this.store);
    if (!tenant) return;
    await this.announcing(
      Promise.resolve(grants.recordGrantUse(this.store, tenant.id, item, Date.now())),
    );
  }
  /**
   * After a change that wrote the tenant's own events (grants.ts): sent to the queue off the
   * request, with the alarm armed as the outbox's backstop (record.ts sends what is left).
   */
  private async announcing<T>(change: Promise<T>): Promise<T> {
    const done = await change;
    const armed = await this.ctx.storage.getAlarm();
    const due = Date.now() + OUTBOX_RETRY_MS;
    if (armed === null || due < armed) await this.ctx.storage.setAlarm(due);
    this.ctx.waitUntil(this.sendOwnEvents());
    return done;
  }
  // ── Tripwires (tripwires.ts, issue 34) ───────────────────────────────────────────────────────

  async putTripwire(tenantId: string, wire: Tripwire) {
    return tripwires.putTripwire(this.store, this.env, tenantId, wire);
  }
  async deleteTripwire(tenantId: string, id: string) {
    return tripwires.deleteTripwire(this.store, this.env, tenantId, id);
  }
  async listTripwires() {
    return tripwires.listTripwires(this.store);
  }
  /** A tripwire's counter tripped: its freeze and event, once per freeze id; the event sent now. */
  async tripFreeze(
    tenantId: string,
    trip: tripwires.TripNotice,
  ): Promise<Result<boolean, TenantError>> {
    const made = tripwires.tripFreeze(this.store, tenantId, trip);
    if (made.ok && made.value) {
      this.ctx.waitUntil(this.sendOwnEvents());
      const armed = await this.ctx.storage.getAlarm();
      const due = Date.now() + OUTBOX_RETRY_MS;
      if (armed === null || due < armed) await this.ctx.storage.setAlarm(due);
    }
    return made;
  }

  /** A tripped counter asks before it answers "tripped": was its freeze lifted (a lost tell)? */
  async tripLifted(tenantId: string, freezeId: string): Promise<Result<boolean, TenantError>> {
    return tripwires.tripLifted(this.store, tenantId, freezeId);
  }

  /** Delivered by operations from their outbox: held by a freeze, or no longer. */
  async markHeld(item: HeldItem, open: boolean, seq: number): Promise<void> {
    return freezes.markHeld(this.store, this.ctx.storage, item, open, seq);
  }

  /** Snapshots the named tools for a run; every name must resolve. */
  async sources(names: string[]): Promise<Result<Record<string, ToolSource>, TenantError>> {
    return registry.sources(this.store, names);
  }

  /**
   * A run's tools and the tenant facts its operations use (issue 19: read once, not per call).
   * `newRunId`: the run this read is for (POST /v1/runs), recorded in the tenant's list of runs.
   */
  async runTools(
    tenantId: string,
    names: string[],
    newRunId: string | null = null,
  ): Promise<Result<RunTools, TenantError>> {
    const read = await runTools(this.store, this.env, tenantId, names);
    if (read.ok && newRunId !== null) runs.recordRun(this.store, newRunId, Date.now());
    return read;
  }

  // ── The tenant's runs (runs.ts): what an index rebuild walks ─────────────────────────────────

  /** A page of the tenant's run ids (with when each was recorded), in id order after `afterRunId`. */
  async runPage(afterRunId: string | null, limit: number) {
    return runs.runPage(this.store, afterRunId, Math.min(Math.max(1, limit), 1000));
  }

  /** Runs pruned by retention (or never made): they leave the list. */
  async forgetRuns(runIds: string[]): Promise<{ ok: true }> {
    runs.forgetRuns(this.store, runIds);
    return { ok: true };
  }

  /** A run's background refresh of its tenant facts (`known`: the version it holds). */
  async facts(tenantId: string, tools: Record<string, ToolSource>, known: string | null) {
    return readFacts(this.store, this.env, tenantId, tools, known);
  }

  /** Which of `names` this tenant knows at all (a registered manifest or a code tool). Read-only. */
  async knownTools(names: string[]): Promise<string[]> {
    return registry.knownTools(this.store, names);
  }

  // ── Secrets (secrets.ts) ─────────────────────────────────────────────────────────────────────

  async putSecret(
    tenantId: string,
    name: string,
    value: string,
  ): Promise<Result<secrets.SecretRecord & { created: boolean }, TenantError>> {
    return secrets.putSecret(this.store, this.env, tenantId, name, value);
  }

  async listSecrets(): Promise<secrets.SecretRecord[]> {
    return secrets.listSecrets(this.store);
  }

  async deleteSecret(name: string): Promise<Result<true, TenantError>> {
    return secrets.deleteSecret(this.store, name);
  }

  /** The decrypted values of exactly `names`, for one attempt of one of this tenant's operations. */
  async secretsFor(
    tenantId: string,
    names: string[],
  ): Promise<Result<Record<string, string>, secrets.SecretsError>> {
    return secrets.secretsFor(this.store, this.env, tenantId, names);
  }

  // ── Receipt signing keys (receipt-keys.ts, issue 37) ─────────────────────────────────────────

  /** The key this tenant's operations sign receipts with now, its private half still sealed. */
  async receiptSigner(tenantId: string): Promise<Result<receiptKeys.ReceiptSigner, TenantError>> {
    return receiptKeys.receiptSigner(this.store, this.env, tenantId);
  }

  async rotateReceiptKey(tenantId: string): Promise<Result<receiptKeys.ReceiptJwk[], TenantError>> {
    return receiptKeys.rotateReceiptKey(this.store, this.env, tenantId);
  }

  /** The public keys, every one ever used; an unknown tenant is not found (nothing is created). */
  async receiptJwks(tenantId: string): Promise<Result<receiptKeys.ReceiptJwk[], TenantError>> {
    if (tenantRecord(this.store)?.id !== tenantId)
      return err({ code: "not_found", detail: "no such tenant" });
    return ok(receiptKeys.receiptJwks(this.store));
  }

  // ── Approvals inbox and unknown outcomes (inbox.ts) ──────────────────────────────────────────

  /** Delivered by operations from their outbox; `seq` orders one operation's deliveries. */
  async upsertApproval(item: ApprovalItem, seq: number): Promise<void> {
    return this.inbox.upsertApproval(item, seq);
  }

  /** Newest first; `pending` = still waiting for a person, `decided` = everything else. */
  async listApprovals(
    state: "pending" | "decided",
    cursor: string | null,
    limit: number,
  ): Promise<ApprovalPage> {
    return this.inbox.listApprovals(state, cursor, limit);
  }

  /** Delivered by operations from their outbox: an operation started or stopped waiting for a person. */
  async markUnknown(item: UnknownItem, open: boolean, seq: number): Promise<void> {
    return this.inbox.markUnknown(item, open, seq);
  }

  /** Unknown outcomes for people (or settling late by themselves), oldest first, each checked with its operation. */
  async listUnknowns(
    limit: number,
  ): Promise<Array<{ operation_id: string; run_id: string; tool: string; since: string }>> {
    return this.inbox.listUnknowns(limit);
  }

  // ── Events (events.ts) ───────────────────────────────────────────────────────────────────────

  /** Stored by the EVENTS queue consumer, once per id; the answer says where each goes. */
  async receiveEvents(
    tenantId: string,
    events: ToolgateEvent[],
  ): Promise<Result<webhooks.EventRoutes, TenantError>> {
    return stored.receiveEvents(this.store, this.ctx.storage, this.env, tenantId, events);
  }

  /** The pull feed (GET /v1/events): oldest first after the cursor. */
  async listEvents(query: stored.EventsQuery): Promise<Result<stored.EventsPage, TenantError>> {
    return stored.listEvents(this.store, query);
  }

  // ── Webhook endpoints and their delivery logs (webhooks.ts) ──────────────────────────────────

  /** `secret` only when created: it is never shown again. */
  async putWebhook(
    tenantId: string,
    id: string,
    spec: webhooks.WebhookSpec,
  ): Promise<Result<webhooks.WebhookRecord & { created: boolean; secret?: string }, TenantError>> {
    return webhooks.putWebhook(this.store, this.env, tenantId, id, spec);
  }

  /** A run's notify.url (run-endpoints.ts): `secret` only in the creating answer. */
  async putRunEndpoint(tenantId: string, args: runEndpoints.RunEndpointArgs) {
    return runEndpoints.putRunEndpoint(this.store, this.env, this.ctx.storage, tenantId, args);
  }

  async listWebhooks(): Promise<webhooks.WebhookRecord[]> {
    return webhooks.listWebhooks(this.store);
  }

  async deleteWebhook(id: string): Promise<Result<true, TenantError>> {
    return webhooks.deleteWebhook(this.store, id);
  }

  async rotateWebhookSecret(
    tenantId: string,
    id: string,
  ): Promise<Result<{ id: string; secret: string }, TenantError>> {
    return webhooks.rotateWebhookSecret(this.store, this.env, tenantId, id);
  }

  /** The endpoints subscribed to `type`, secrets opened, for one delivery from this Worker. */
  async webhookTargets(
    tenantId: string,
    type: EventType,
    also: string | null = null,
  ): Promise<Result<webhooks.WebhookTarget[], TenantError>> {
    return webhooks.webhookTargets(this.store, this.env, tenantId, type, also);
  }

  /** A queue batch's scheduled retries: per retry its endpoint, or why it is not sent (webhooks.ts). */
  async deliveryTargets(
    tenantId: string,
    asks: Array<webhooks.RoutedEvent & { endpoint_id: string }>,
  ): Promise<Result<webhooks.RetryTarget[], TenantError>> {
    return webhooks.deliveryTargets(this.store, this.env, tenantId, asks);
  }

  async redeliveryOf(
    tenantId: string,
    id: string,
    eventId: string,
  ): Promise<Result<{ target: webhooks.WebhookTarget; event: ToolgateEvent }, TenantError>> {
    return webhooks.redeliveryOf(this.store, this.env, tenantId, id, eventId);
  }

  /**
   * One endpoint's attempts, in order; null: it was deleted while they were in flight (nothing is
   * logged). The log's retention rides on the tenant's alarm (armed here if nothing armed it); an
   * endpoint.failing this record wrote goes to the queue now, and from the alarm if that fails.
   */
  async recordDeliveries(
    endpointId: string,
    attempts: deliveries.DeliveryAttempt[],
  ): Promise<deliveries.LoggedAttempt[] | null> {
    const recorded = deliveries.recordDeliveries(this.store, endpointId, attempts);
    if (!recorded) return null;
    const armed = await this.ctx.storage.getAlarm();
    const now = Date.now();
    const due = recorded.announced ? now + OUTBOX_RETRY_MS : now + retentionMs(this.env);
    if (armed === null || due < armed) await this.ctx.storage.setAlarm(due);
    if (recorded.announced) this.ctx.waitUntil(this.sendOwnEvents());
    return recorded.logged;
  }

  /** The tenant's own events to the queue, one send at a time (events.ts). */
  private sendOwnEvents(): Promise<number | null> {
    const next = this.sending.then(() => stored.sendTenantEvents(this.store, this.env));
    this.sending = next.then(() => undefined);
    return next;
  }
  private sending: Promise<void> = Promise.resolve();

  async listDeliveries(id: string, limit: number): Promise<Result<DeliveryRecord[], TenantError>> {
    return deliveries.listDeliveries(this.store, id, limit);
  }

  async notificationStates(
    operationIds: string[],
    type: EventType | null = null,
  ): Promise<Record<string, NotificationState>> {
    return notificationStates(this.store, operationIds, type);
  }
}

const tenantRecordId = (store: SqlStore): string => tenantRecord(store)?.id ?? "";
