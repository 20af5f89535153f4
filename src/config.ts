// The deployment's plain variables (wrangler.toml [vars] + `wrangler secret put`) and their readers:
// each reader parses one variable, and a malformed safety setting fails closed or keeps its default
// (logged as toolgate.misconfigured), never silently open. A leaf: nothing here imports durable/,
// so any module may read configuration without reaching the object classes (Env: durable/env.ts).
import { z } from "zod";
import { err, ok, type Result } from "./domain/result.ts";
import { DEFAULT_RETRY_BUDGET, type RetryBudgetConfig } from "./domain/retry-budget.ts";
import type { Price } from "./domain/pricing.ts";
import { DEFAULT_SETTLE_SCHEDULE_MS } from "./domain/retry-late.ts";

export type DeploymentVars = {
  /** Secret: bearer token for the API until per-tenant keys exist. */
  TOOLGATE_ADMIN_TOKEN?: string;
  /** Secret: HMAC key for run tokens. */
  TOOLGATE_SIGNING_KEY?: string;
  /** Secret: root key that tenant secrets are encrypted under (HKDF per tenant, AES-GCM). */
  TOOLGATE_SECRETS_KEY?: string;
  /** Comma-separated hosts (or *.suffix) that tool URLs may target. */
  TOOLGATE_UPSTREAM_ALLOWLIST?: string;
  /** "development" allows loopback upstreams; anything else is production. */
  TOOLGATE_ENV?: string;
  /** /mcp: comma-separated hostnames accepted in Host (default: loopback in development, any in production). */
  TOOLGATE_MCP_ALLOWED_HOSTS?: string;
  /** /mcp: comma-separated hostnames of browser origins allowed besides the request's own host. */
  TOOLGATE_MCP_ALLOWED_ORIGINS?: string;
  /** JSON price table for model usage in cost units (see domain/pricing.ts). */
  TOOLGATE_MODEL_PRICES?: string;
  /** "true": header tools whose idempotency is not verified run as mode "none" (see requireVerifiedIdempotency). */
  TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY?: string;
  /** How long a settled operation is kept before it is pruned (ms; default 7 days, at least 1 hour). */
  TOOLGATE_RETENTION_MS?: string;
  /**
   * Automatic retries per tenant and upstream host, as a share of its recent first attempts
   * (default 0.1, on top of a floor of 10 retries per 10 s); "off" turns the retry budget off.
   */
  TOOLGATE_RETRY_BUDGET_RATIO?: string;
  /**
   * Late settlement's schedule (domain/retry-late.ts): comma-separated gaps in ms between late
   * tries, the last repeating (default 1 min, 5 min, 30 min, 2 h, 6 h). Tests compress it.
   */
  TOOLGATE_SETTLE_SCHEDULE_MS?: string;
  /**
   * Development only (TOOLGATE_ENV "development"): the latency model, `Class=ms[,Class=ms]`, e.g.
   * "TenantObject=150" delays every RPC to a TenantObject by 150 ms (an object on another continent).
   */
  TOOLGATE_DEV_RPC_DELAY?: string;
  /**
   * Where people reach this deployment's console (origin, e.g. "https://toolgate.example.com"):
   * every link toolgate makes (Slack buttons, a webhook's console_url, `GET /`). Unset: the
   * origin the request came in on.
   */
  TOOLGATE_CONSOLE_URL?: string;
  /**
   * Cloudflare Access (issue 35): the team domain ("myteam.cloudflareaccess.com" or its https URL)
   * and the Access application's Audience (AUD) tag. Both set: a `Cf-Access-Jwt-Assertion` on a
   * decision is verified against the team's JWKS and names the person who decided.
   */
  TOOLGATE_ACCESS_TEAM_DOMAIN?: string;
  TOOLGATE_ACCESS_AUD?: string;
  /** OpenTelemetry collector base URL: recorded operations' spans are pushed to {it}/v1/traces. */
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  /** Secret: headers for the collector, `name=value,name2=value2` (OTLP exporter convention). */
  OTEL_EXPORTER_OTLP_HEADERS?: string;
  /**
   * Other plain variables a code tool may declare it reads (`defineTool({ config: [...] })`), e.g.
   * DEMO_UPSTREAM_URL. Manifests can never read any binding: {secret:NAME} names tenant secrets.
   */
  [variable: string]: unknown;
};

/** Exactly the variables a code tool declared, as strings; TOOLGATE_* are refused at defineTool. */
export function configFor(env: DeploymentVars, names: readonly string[]): Record<string, string> {
  const config: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (!name.startsWith("TOOLGATE_") && typeof value === "string") config[name] = value;
  }
  return config;
}

export function hostPolicy(env: DeploymentVars) {
  return {
    allowlist: commaList(env.TOOLGATE_UPSTREAM_ALLOWLIST),
    allowLoopback: isDevelopment(env),
  };
}

/** TOOLGATE_ENV "development": loopback upstreams and /mcp hosts, /v1/admin/stats. Anything else is production. */
export const isDevelopment = (env: DeploymentVars): boolean => env.TOOLGATE_ENV === "development";

/** TOOLGATE_SIGNING_KEY, or null when the deployment has none (its users answer `misconfigured`). */
export const signingKeyOf = (env: DeploymentVars): string | null =>
  env.TOOLGATE_SIGNING_KEY || null;

/** The one sentence every refusal for want of a signing key says (API problem, console page). */
export const SIGNING_KEY_MISSING = "TOOLGATE_SIGNING_KEY is not set for this deployment";

/** TOOLGATE_SIGNING_KEY, or the `misconfigured` error every use of it answers without one. */
export function signingKeyRequired(
  env: DeploymentVars,
): Result<string, { code: "misconfigured"; detail: string }> {
  const key = signingKeyOf(env);
  return key ? ok(key) : err({ code: "misconfigured", detail: SIGNING_KEY_MISSING });
}

/** TOOLGATE_ADMIN_TOKEN, or null when the deployment has none (the admin API answers `misconfigured`). */
export const adminTokenOf = (env: DeploymentVars): string | null =>
  env.TOOLGATE_ADMIN_TOKEN || null;

/** /mcp's DNS-rebinding lists (lower-cased hostnames): TOOLGATE_MCP_ALLOWED_HOSTS and _ORIGINS. */
export const mcpAllowLists = (env: DeploymentVars) => ({
  hosts: commaList(env.TOOLGATE_MCP_ALLOWED_HOSTS),
  origins: commaList(env.TOOLGATE_MCP_ALLOWED_ORIGINS),
});

const commaList = (value: unknown): string[] =>
  typeof value === "string"
    ? value
        .split(",")
        .map((name) => name.trim().toLowerCase())
        .filter(Boolean)
    : [];

/**
 * TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY. Unset, "", "false", "0" or "off": off (local default).
 * Any other value turns it on: a misspelt safety setting fails closed, never silently open.
 */
export function requireVerifiedIdempotency(env: DeploymentVars): boolean {
  const value = (env.TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY ?? "").trim().toLowerCase();
  return !["", "false", "0", "off"].includes(value);
}

export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60_000;
export const MIN_RETENTION_MS = 60 * 60_000;

/**
 * The origin every link toolgate makes starts with: TOOLGATE_CONSOLE_URL, or the origin of
 * `requestUrl` when it is unset. A value that is not an http(s) URL is a deployment error that
 * falls back to the request's origin (a link to nowhere helps no one).
 */
export function consoleOrigin(env: DeploymentVars, requestUrl: string): string {
  const raw = (env.TOOLGATE_CONSOLE_URL ?? "").trim();
  if (raw !== "") {
    try {
      const url = new URL(raw);
      if (url.protocol === "https:" || url.protocol === "http:") return url.origin;
    } catch {}
    console.error(
      JSON.stringify({
        level: "error",
        event: "toolgate.misconfigured",
        detail: "TOOLGATE_CONSOLE_URL must be an http(s) origin; links use the request's origin",
      }),
    );
  }
  return new URL(requestUrl).origin;
}

/**
 * The retention period. A value that is not a whole number of ms of at least an hour is a
 * deployment error: it keeps the default (pruning early would forget outcomes it still promises).
 */
export function retentionMs(env: DeploymentVars): number {
  const raw = env.TOOLGATE_RETENTION_MS;
  if (raw === undefined || raw === "") return DEFAULT_RETENTION_MS;
  const value = Number(raw);
  if (Number.isSafeInteger(value) && value >= MIN_RETENTION_MS) return value;
  console.error(
    JSON.stringify({
      level: "error",
      event: "toolgate.misconfigured",
      detail: `TOOLGATE_RETENTION_MS must be a whole number of ms >= ${MIN_RETENTION_MS}; keeping ${DEFAULT_RETENTION_MS}`,
    }),
  );
  return DEFAULT_RETENTION_MS;
}

/**
 * TOOLGATE_RETRY_BUDGET_RATIO. Unset or "": the default budget; "off": none (null). A value that
 * is not a ratio in [0, 10] is a deployment error that keeps the default: a misspelt protection
 * stays on.
 */
export function retryBudgetConfig(env: DeploymentVars): RetryBudgetConfig | null {
  const raw = (env.TOOLGATE_RETRY_BUDGET_RATIO ?? "").trim().toLowerCase();
  if (raw === "") return DEFAULT_RETRY_BUDGET;
  if (raw === "off") return null;
  const ratio = Number(raw);
  if (Number.isFinite(ratio) && ratio >= 0 && ratio <= 10)
    return { ...DEFAULT_RETRY_BUDGET, ratio };
  console.error(
    JSON.stringify({
      level: "error",
      event: "toolgate.misconfigured",
      detail: `TOOLGATE_RETRY_BUDGET_RATIO must be "off" or a number in [0, 10]; keeping ${DEFAULT_RETRY_BUDGET.ratio}`,
    }),
  );
  return DEFAULT_RETRY_BUDGET;
}

/** At most this many gaps; each at least 1 s (a late try per second would be a retry storm). */
const SETTLE_SCHEDULE_MAX_GAPS = 20;
const SETTLE_GAP_MIN_MS = 1_000;

/**
 * TOOLGATE_SETTLE_SCHEDULE_MS, frozen into each new operation's plan. Unset or "": the default. A
 * value that is not a list of 1–20 whole numbers of ms ≥ 1000 is a deployment error that keeps the
 * default (logged): late tries never run faster than configured by mistake.
 */
export function settleScheduleMs(env: DeploymentVars): readonly number[] {
  const raw = (env.TOOLGATE_SETTLE_SCHEDULE_MS ?? "").trim();
  if (raw === "") return DEFAULT_SETTLE_SCHEDULE_MS;
  const gaps = raw.split(",").map((part) => Number(part.trim()));
  if (
    gaps.length <= SETTLE_SCHEDULE_MAX_GAPS &&
    gaps.every((gap) => Number.isSafeInteger(gap) && gap >= SETTLE_GAP_MIN_MS)
  )
    return gaps;
  console.error(
    JSON.stringify({
      level: "error",
      event: "toolgate.misconfigured",
      detail: `TOOLGATE_SETTLE_SCHEDULE_MS must be 1-${SETTLE_SCHEDULE_MAX_GAPS} comma-separated whole numbers of ms >= ${SETTLE_GAP_MIN_MS}; keeping ${DEFAULT_SETTLE_SCHEDULE_MS.join(",")}`,
    }),
  );
  return DEFAULT_SETTLE_SCHEDULE_MS;
}

const PriceTable = z.record(
  z.string(),
  z
    .object({ input_per_mtok: z.number().nonnegative(), output_per_mtok: z.number().nonnegative() })
    .strict(),
);
export type ConfigError = { code: "misconfigured"; detail: string };

/**
 * The model price table. Unset means no model is priced (budgets count tool cost only); a value
 * that is not a valid table is a deployment error, never silently zero cost.
 */
export function modelPrices(env: DeploymentVars): Result<Record<string, Price>, ConfigError> {
  if (env.TOOLGATE_MODEL_PRICES === undefined || env.TOOLGATE_MODEL_PRICES === "") return ok({});
  let raw: unknown;
  try {
    raw = JSON.parse(env.TOOLGATE_MODEL_PRICES);
  } catch {
    return err({ code: "misconfigured", detail: "TOOLGATE_MODEL_PRICES is not valid JSON" });
  }
  const parsed = PriceTable.safeParse(raw);
  if (!parsed.success)
    return err({
      code: "misconfigured",
      detail: `TOOLGATE_MODEL_PRICES: ${z.prettifyError(parsed.error)}`,
    });
  return ok(parsed.data);
}

/** TOOLGATE_SECRETS_KEY: the root key tenant secrets are sealed under; unset is a deployment error. */
export function secretsKey(env: DeploymentVars): Result<string, ConfigError> {
  const key = env.TOOLGATE_SECRETS_KEY;
  return key
    ? ok(key)
    : err({
        code: "misconfigured",
        detail:
          "TOOLGATE_SECRETS_KEY is not set for this deployment (wrangler secret put TOOLGATE_SECRETS_KEY)",
      });
}

/** The object classes TOOLGATE_DEV_RPC_DELAY may name (durable/stubs.ts makes their stubs). */
export const OBJECT_CLASSES = [
  "OperationObject",
  "RunObject",
  "TenantObject",
  "ResourceLockObject",
  "RetryBudgetObject",
  "LimitObject",
  "IndexObject",
  "CredentialObject",
] as const;
export type ObjectClass = (typeof OBJECT_CLASSES)[number];
const parsedDelays = new Map<string, Partial<Record<ObjectClass, number>>>();

/**
 * TOOLGATE_DEV_RPC_DELAY, the latency model: ms of delay per object class, e.g.
 * "TenantObject=150". Development only: set anywhere else, or malformed (an unknown class, a delay
 * that is not a whole number of ms in [0, 10000]), it is refused as a whole — logged once per
 * isolate as toolgate.misconfigured, and no RPC is delayed.
 */
export function devRpcDelays(env: DeploymentVars): Partial<Record<ObjectClass, number>> {
  const raw = (env.TOOLGATE_DEV_RPC_DELAY ?? "").trim();
  if (raw === "") return {};
  const key = `${env.TOOLGATE_ENV ?? ""}|${raw}`;
  const known = parsedDelays.get(key);
  if (known) return known;
  const delays: Partial<Record<ObjectClass, number>> = {};
  let problem = isDevelopment(env)
    ? null
    : 'TOOLGATE_DEV_RPC_DELAY is a development setting (TOOLGATE_ENV="development"); ignored';
  for (const part of problem ? [] : raw.split(",")) {
    const [name = "", ms = ""] = part.split("=").map((text) => text.trim());
    const value = Number(ms);
    if (!(OBJECT_CLASSES as readonly string[]).includes(name))
      problem = `TOOLGATE_DEV_RPC_DELAY: unknown object class "${name}" (one of ${OBJECT_CLASSES.join(", ")}); ignored`;
    else if (ms === "" || !Number.isSafeInteger(value) || value < 0 || value > 10_000)
      problem = `TOOLGATE_DEV_RPC_DELAY: ${name}'s delay must be whole ms in [0, 10000]; ignored`;
    else delays[name as ObjectClass] = value;
    if (problem) break;
  }
  if (problem)
    console.error(
      JSON.stringify({ level: "error", event: "toolgate.misconfigured", detail: problem }),
    );
  const result = problem ? {} : delays;
  parsedDelays.set(key, result);
  return result;
}

/** Where Access tokens come from and whom they are for: the issuer (team origin), its JWKS and the AUD tag. */
export type AccessConfig = { issuer: string; jwksUrl: string; audience: string };

/**
 * TOOLGATE_ACCESS_TEAM_DOMAIN + TOOLGATE_ACCESS_AUD, or null when neither is set (no Access: a
 * decider is the API key or console session). Only one set, or a team domain that is not an https
 * origin (loopback http in development only), is `misconfigured`: a decision then fails closed.
 */
export function accessConfig(env: DeploymentVars): Result<AccessConfig | null, ConfigError> {
  const domain = (env.TOOLGATE_ACCESS_TEAM_DOMAIN ?? "").trim();
  const audience = (env.TOOLGATE_ACCESS_AUD ?? "").trim();
  if (!domain && !audience) return ok(null);
  const problem = (detail: string) => err({ code: "misconfigured" as const, detail });
  if (!domain || !audience)
    return problem(
      "Cloudflare Access needs both TOOLGATE_ACCESS_TEAM_DOMAIN and TOOLGATE_ACCESS_AUD",
    );
  let url: URL;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(domain) ? domain : `https://${domain}`);
  } catch {
    return problem("TOOLGATE_ACCESS_TEAM_DOMAIN is not a host name or URL");
  }
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
  if (url.protocol !== "https:" && !(isDevelopment(env) && loopback && url.protocol === "http:"))
    return problem("TOOLGATE_ACCESS_TEAM_DOMAIN must be an https origin");
  const issuer = `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
  return ok({ issuer, jwksUrl: `${issuer}/cdn-cgi/access/certs`, audience });
}
