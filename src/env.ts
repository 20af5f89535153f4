// Bindings and configuration of one deployment (wrangler.toml + `wrangler secret put`).
import type { OperationObject } from "./durable/operation-object.ts";
import type { RunObject } from "./durable/run-object.ts";
import type { TenantObject } from "./durable/tenant-object.ts";
import type { Price } from "./domain/pricing.ts";

export type Env = {
  OPERATIONS: DurableObjectNamespace<OperationObject>;
  RUNS: DurableObjectNamespace<RunObject>;
  TENANTS: DurableObjectNamespace<TenantObject>;
  /** Secret: bearer token for the API until per-tenant keys exist. */
  TOOLGATE_ADMIN_TOKEN?: string;
  /** Secret: HMAC key for run tokens. */
  TOOLGATE_SIGNING_KEY?: string;
  /** Comma-separated hosts (or *.suffix) that tool URLs may target. */
  TOOLGATE_UPSTREAM_ALLOWLIST?: string;
  /** "development" allows loopback upstreams; anything else is production. */
  TOOLGATE_ENV?: string;
  /** JSON price table for model usage in cost units (see domain/pricing.ts). */
  TOOLGATE_MODEL_PRICES?: string;
  /** Any other binding is a secret a tool header may reference as {secret:NAME}. */
  [secret: string]: unknown;
};

export function hostPolicy(env: Env) {
  return {
    allowlist: (env.TOOLGATE_UPSTREAM_ALLOWLIST ?? "").split(",").map((h) => h.trim()).filter(Boolean),
    allowLoopback: env.TOOLGATE_ENV === "development",
  };
}

export function modelPrices(env: Env): Record<string, Price> {
  try {
    return env.TOOLGATE_MODEL_PRICES ? (JSON.parse(env.TOOLGATE_MODEL_PRICES) as Record<string, Price>) : {};
  } catch {
    return {};
  }
}
