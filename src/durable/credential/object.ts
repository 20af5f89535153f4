// CredentialObject (issue 36): one per (tenant, end user, OAuth provider) — the one home of that
// user's tokens there, sealed, never returned except as the access token handed to the operation
// about to send. Invariants:
// - One refresh at a time: concurrent `token` calls share the refresh in flight (memory); a new
//   instance starts from storage alone.
// - A rotated refresh token replaces the old one in the same single-row write as the new access
//   token: there is never a moment with neither stored. A refresh whose answer is never stored
//   (the object died in between) leaves the old pair, which the provider's reuse interval (or the
//   next consent) covers: never a half-written set.
// - A connect's state is single-use: its nonce row is deleted in the transaction that begins the
//   exchange, before any byte goes to the provider, so a replayed callback finds nothing.
// - Operations waiting for this user to connect are listed here and woken after a connect.
import { DurableObject } from "cloudflare:workers";
import { openSecret, sealSecret } from "../../crypto.ts";
import { secretsKey } from "../../config.ts";
import { beforeSend, health, scopesToAsk, type TokenFacts } from "../../domain/credential.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Env } from "../env.ts";
import { SqlStore } from "../store/sql-store.ts";
import { operationStub, tenantStub } from "../stubs.ts";
import type { ConnectionView, CredentialError, TokenAnswer } from "./contracts.ts";
import * as protocol from "./protocol.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS cred_owner (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, user_id TEXT NOT NULL, provider TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cred_tokens (k INTEGER PRIMARY KEY CHECK (k = 1), access_iv TEXT NOT NULL, access_ct TEXT NOT NULL, refresh_iv TEXT, refresh_ct TEXT, expires_at_ms INTEGER, scopes TEXT NOT NULL, connected_at_ms INTEGER NOT NULL, refreshed_at_ms INTEGER);
CREATE TABLE IF NOT EXISTS cred_dead (k INTEGER PRIMARY KEY CHECK (k = 1), reason TEXT NOT NULL, at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cred_pending (nonce TEXT PRIMARY KEY, verifier TEXT NOT NULL, redirect_uri TEXT NOT NULL, state TEXT NOT NULL, scopes TEXT NOT NULL, expires_at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cred_waiters (operation_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID;`;

/** A connect link is good this long (a person may open it from an inbox or a chat much later). */
export const CONNECT_TTL_MS = 24 * 60 * 60_000;

export type Owner = { tenantId: string; user: string; provider: string };
type TokenRow = {
  access_iv: string;
  access_ct: string;
  refresh_iv: string | null;
  refresh_ct: string | null;
  expires_at_ms: number | null;
  scopes: string;
  connected_at_ms: number;
};

export class CredentialObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, SCHEMA);
  /** The refresh in flight: every `token` call meanwhile waits for it (one refresh at a time). */
  private refreshing: Promise<TokenAnswer> | null = null;

  /** POST /v1/connections and an operation's connect link: a new single-use state and its URL. */
  async begin(
    owner: Owner,
    nonce: string,
    state: string,
    redirectUri: string,
    scopes: string[],
  ): Promise<Result<{ authorization_url: string }, CredentialError>> {
    const mine = this.own(owner);
    if (!mine.ok) return mine;
    const provider = await this.provider(owner);
    if (!provider.ok) return provider;
    const verifier = protocol.newVerifier();
    const asked = scopesToAsk(provider.value.scopes, scopes);
    const url = await protocol.authorizationUrl(
      provider.value,
      redirectUri,
      state,
      verifier,
      asked,
    );
    const nowMs = Date.now();
    this.store.transaction(() => {
      this.store.ensureTable("cred_pending");
      this.store.run("DELETE FROM cred_pending WHERE expires_at_ms <= ?", nowMs);
      this.store.run(
        "INSERT INTO cred_pending (nonce, verifier, redirect_uri, state, scopes, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
        nonce,
        verifier,
        redirectUri,
        state,
        JSON.stringify(asked),
        nowMs + CONNECT_TTL_MS,
      );
    });
    return ok({ authorization_url: url });
  }

  /** The public callback: the state's nonce spent, the code exchanged, the tokens stored, waiters woken. */
  async complete(
    owner: Owner,
    nonce: string,
    callbackUrl: string,
  ): Promise<Result<{ user: string; provider: string }, CredentialError>> {
    const invalid = err({
      code: "connection_state_invalid" as const,
      detail: "this connect link is not valid (unknown, used already or expired); start again",
    });
    if (!this.owned(owner)) return invalid;
    const pending = this.store.exists("cred_pending")
      ? this.store.one<{
          verifier: string;
          redirect_uri: string;
          state: string;
          scopes: string;
          expires_at_ms: number;
        }>("SELECT * FROM cred_pending WHERE nonce = ?", nonce)
      : null;
    if (!pending || pending.expires_at_ms <= Date.now()) return invalid;
    // Spent before the exchange: a replay, even one racing this request, finds nothing.
    this.store.run("DELETE FROM cred_pending WHERE nonce = ?", nonce);
    const provider = await this.provider(owner);
    if (!provider.ok) return provider;
    const tokens = await protocol.exchangeCode(
      provider.value,
      new URL(callbackUrl),
      pending.state,
      pending.redirect_uri,
      pending.verifier,
    );
    if (!tokens.ok)
      return err({
        code: "connection_failed",
        detail: `the provider did not complete the connection (${tokens.error.detail}); start again`,
      });
    // A token answer without `scope` granted what was asked (RFC 6749 §5.1).
    const asked = JSON.parse(pending.scopes) as string[];
    await this.storeTokens(owner, tokens.value, null, Date.now(), asked);
    // Told before the user's page answers: a client that retries once the user is back (an MCP
    // URL-mode elicitation) finds the call already sending, not still waiting.
    await this.wakeWaiters();
    return ok({ user: owner.user, provider: owner.provider });
  }

  /** Immediately before a send: the access token (refreshed first when due), or why there is none. */
  async token(owner: Owner, scopes: string[]): Promise<TokenAnswer> {
    if (!this.owned(owner)) return { kind: "needs_consent", reason: "never connected" };
    const row = this.tokens();
    const facts = this.facts(row);
    const decision = beforeSend(facts, scopes, Date.now());
    if (decision === "needs_consent")
      return { kind: "needs_consent", reason: this.deadReason() ?? consentReason(facts, scopes) };
    if (decision === "use") return this.open(owner, row!, "access");
    this.refreshing ??= this.refresh(owner).finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  /** An operation waiting for this user to connect: woken after the next connect. */
  async wait(owner: Owner, operationId: string): Promise<void> {
    if (!this.own(owner).ok) return;
    this.store.ensureTable("cred_waiters");
    this.store.run(
      "INSERT OR IGNORE INTO cred_waiters (operation_id, at_ms) VALUES (?, ?)",
      operationId,
      Date.now(),
    );
  }

  async view(owner: Owner, scopes: string[]): Promise<ConnectionView> {
    const row = this.owned(owner) ? this.tokens() : null;
    const facts = this.facts(row);
    return {
      provider: owner.provider,
      user: owner.user,
      health: health(facts, scopes, Date.now()),
      scopes: facts?.scopes ?? [],
      expires_at: facts?.expiresAtMs != null ? new Date(facts.expiresAtMs).toISOString() : null,
      connected_at: row ? new Date(row.connected_at_ms).toISOString() : null,
      reason: this.deadReason(),
    };
  }

  /** DELETE /v1/connections/{provider}?user=: the tokens dropped; false when there were none. */
  async disconnect(owner: Owner): Promise<boolean> {
    if (!this.owned(owner) || !this.tokens()) return false;
    this.store.transaction(() => {
      this.store.run("DELETE FROM cred_tokens");
      this.markDead("disconnected");
    });
    return true;
  }

  private async refresh(owner: Owner): Promise<TokenAnswer> {
    const row = this.tokens();
    if (!row?.refresh_iv || !row.refresh_ct) return { kind: "needs_consent", reason: "expired" };
    const [provider, current] = await Promise.all([
      this.provider(owner),
      this.openValue(owner, { iv: row.refresh_iv, ciphertext: row.refresh_ct }, "refresh"),
    ]);
    // A provider deleted (forced, while tools still used it) never comes back by retrying: the
    // user must connect a provider of that id again. Anything else may pass: retried.
    if (!provider.ok)
      return provider.error.code === "unknown_oauth_provider"
        ? { kind: "needs_consent", reason: "the OAuth provider was deleted" }
        : { kind: "transient", detail: provider.error.detail };
    if (!current) return { kind: "needs_consent", reason: "the stored token could not be opened" };
    const answered = await protocol.refresh(provider.value, current);
    if (!answered.ok) {
      if (answered.error.kind === "transient")
        return {
          kind: "transient",
          detail: `refreshing the user's token failed: ${answered.error.detail}`,
        };
      this.store.transaction(() => {
        this.store.run("DELETE FROM cred_tokens");
        this.markDead("invalid_grant");
      });
      return { kind: "needs_consent", reason: "invalid_grant" };
    }
    const scopes = this.facts(row)!.scopes;
    await this.storeTokens(owner, answered.value, current, row.connected_at_ms, scopes);
    return { kind: "token", accessToken: answered.value.accessToken };
  }

  /** One row write: the new access token with the new refresh token, else the one it replaced. */
  private async storeTokens(
    owner: Owner,
    tokens: protocol.Tokens,
    previousRefresh: string | null,
    connectedAtMs: number,
    /** The scopes held when the answer names none: those asked (a connect), or those before (a refresh). */
    scopesBefore: string[],
  ): Promise<void> {
    const fresh = previousRefresh === null;
    const master = this.master();
    const nowMs = Date.now();
    const refreshValue = tokens.refreshToken ?? previousRefresh;
    const [access, refresh] = await Promise.all([
      sealSecret(master, owner.tenantId, this.sealName(owner, "access"), tokens.accessToken),
      refreshValue
        ? sealSecret(master, owner.tenantId, this.sealName(owner, "refresh"), refreshValue)
        : Promise.resolve(null),
    ]);
    this.store.transaction(() => {
      this.store.ensureSchema();
      this.store.run(
        "INSERT OR REPLACE INTO cred_tokens (k, access_iv, access_ct, refresh_iv, refresh_ct, expires_at_ms, scopes, connected_at_ms, refreshed_at_ms) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)",
        access.iv,
        access.ciphertext,
        refresh?.iv ?? null,
        refresh?.ciphertext ?? null,
        tokens.expiresInS === null ? null : nowMs + tokens.expiresInS * 1000,
        JSON.stringify(tokens.scopes ?? scopesBefore),
        connectedAtMs,
        fresh ? null : nowMs,
      );
      this.store.run("DELETE FROM cred_dead");
    });
  }

  private async wakeWaiters(): Promise<void> {
    if (!this.store.exists("cred_waiters")) return;
    const waiting = this.store.all<{ operation_id: string }>(
      "SELECT operation_id FROM cred_waiters",
    );
    await Promise.all(
      waiting.map(async ({ operation_id }) => {
        try {
          await operationStub(this.env, operation_id).credentialReady();
          this.store.run("DELETE FROM cred_waiters WHERE operation_id = ?", operation_id);
        } catch (error) {
          // Kept: the operation's own recheck alarm finds the connection anyway.
          console.error("credential: waking an operation failed", operation_id, String(error));
        }
      }),
    );
  }

  /** The provider with its client secret, asked of the tenant for each protocol step (rare: connects, refreshes). */
  private async provider(owner: Owner): Promise<Result<protocol.ProviderUse, CredentialError>> {
    try {
      const found = await tenantStub(this.env, owner.tenantId).oauthProviderForUse(
        owner.tenantId,
        owner.provider,
      );
      if (found.ok) return found;
      const { code, detail } = found.error;
      return err(
        code === "unknown_oauth_provider" || code === "misconfigured"
          ? { code, detail }
          : { code: "unavailable", detail },
      );
    } catch (error) {
      return err({
        code: "unavailable",
        detail: `the tenant could not be asked (${String(error)})`,
      });
    }
  }

  private own(owner: Owner): Result<true, CredentialError> {
    if (this.owned(owner)) return ok(true);
    if (this.owner())
      return err({ code: "connection_state_invalid", detail: "not this connection" });
    this.store.ensureTable("cred_owner");
    this.store.run(
      "INSERT INTO cred_owner (k, tenant_id, user_id, provider) VALUES (1, ?, ?, ?)",
      owner.tenantId,
      owner.user,
      owner.provider,
    );
    return ok(true);
  }

  private owned(owner: Owner): boolean {
    const stored = this.owner();
    return (
      stored !== null &&
      stored.tenant_id === owner.tenantId &&
      stored.user_id === owner.user &&
      stored.provider === owner.provider
    );
  }

  private owner() {
    return this.store.exists("cred_owner")
      ? this.store.one<{ tenant_id: string; user_id: string; provider: string }>(
          "SELECT * FROM cred_owner",
        )
      : null;
  }

  private tokens(): TokenRow | null {
    return this.store.exists("cred_tokens")
      ? this.store.one<TokenRow>("SELECT * FROM cred_tokens")
      : null;
  }

  private facts(row: TokenRow | null): TokenFacts | null {
    if (!row) return null;
    return {
      expiresAtMs: row.expires_at_ms,
      scopes: JSON.parse(row.scopes) as string[],
      hasRefresh: row.refresh_ct !== null,
      dead: false,
    };
  }

  private deadReason(): string | null {
    return this.store.exists("cred_dead")
      ? (this.store.one<{ reason: string }>("SELECT reason FROM cred_dead")?.reason ?? null)
      : null;
  }

  private markDead(reason: string): void {
    this.store.ensureTable("cred_dead");
    this.store.run(
      "INSERT OR REPLACE INTO cred_dead (k, reason, at_ms) VALUES (1, ?, ?)",
      reason,
      Date.now(),
    );
  }

  private async open(owner: Owner, row: TokenRow, kind: "access"): Promise<TokenAnswer> {
    const value = await this.openValue(
      owner,
      { iv: row.access_iv, ciphertext: row.access_ct },
      kind,
    );
    return value
      ? { kind: "token", accessToken: value }
      : { kind: "needs_consent", reason: "the stored token could not be opened" };
  }

  private async openValue(
    owner: Owner,
    sealed: { iv: string; ciphertext: string },
    kind: "access" | "refresh",
  ): Promise<string | null> {
    try {
      return await openSecret(this.master(), owner.tenantId, this.sealName(owner, kind), sealed);
    } catch {
      return null;
    }
  }

  private sealName = (owner: Owner, kind: "access" | "refresh") =>
    `oauth-token:${JSON.stringify([owner.user, owner.provider, kind])}`;

  private master(): string {
    const master = secretsKey(this.env);
    if (!master.ok) throw new Error(master.error.detail);
    return master.value;
  }
}

function consentReason(facts: TokenFacts | null, scopes: string[]): string {
  if (!facts) return "never connected";
  return scopes.some((s) => !facts.scopes.includes(s))
    ? "the connection lacks a scope this tool needs"
    : "expired";
}
