// Typed stubs. workers-types maps RPC return types through Rpc.Serializable, which erases any
// branch holding `unknown` (our envelopes carry untrusted tool output typed as unknown); the
// values cross the stub as structured clones, so the declared method types are the honest ones.
import type { Env } from "./env.ts";
import type { IndexObject } from "./index/object.ts";
import type { LimitObject } from "./limit/object.ts";
import type { CredentialObject } from "./credential/object.ts";
// Development only: the latency model and the RPC counter wrap each stub (rpc-model.ts).
import { modelled } from "./rpc-model.ts";
import type { OperationObject } from "./operation/object.ts";
import type { ResourceLockObject } from "./resource-lock-object.ts";
import type { RetryBudgetObject } from "./retry-budget-object.ts";
import type { RunObject } from "./run/object.ts";
import type { TenantObject } from "./tenant/object.ts";
import { placedStub } from "./placement.ts";

type Methods<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R>
    ? (...args: A) => Promise<R>
    : never;
};

// Every object is reached through placement.ts's placedStub: the name says its jurisdiction.
export const operationStub = (env: Env, operationId: string) =>
  modelled(
    env,
    "OperationObject",
    placedStub(env, "OPERATIONS", operationId),
  ) as unknown as Methods<OperationObject>;
export const runStub = (env: Env, runId: string) =>
  modelled(env, "RunObject", placedStub(env, "RUNS", runId)) as unknown as Methods<RunObject>;
export const tenantStub = (env: Env, tenantId: string) =>
  modelled(
    env,
    "TenantObject",
    placedStub(env, "TENANTS", tenantId),
  ) as unknown as Methods<TenantObject>;
/** One lock object per tenant + resource key (e.g. `order:ord_1`): tenants never share a lock. */
export const lockStub = (env: Env, tenantId: string, resource: string) =>
  modelled(
    env,
    "ResourceLockObject",
    placedStub(env, "LOCKS", `${tenantId}:${resource}`),
  ) as unknown as Methods<ResourceLockObject>;
/** One retry budget per tenant + upstream origin (domain/retry-budget.ts budgetKey). */
export const budgetStub = (env: Env, key: string) =>
  modelled(
    env,
    "RetryBudgetObject",
    placedStub(env, "BUDGETS", key),
  ) as unknown as Methods<RetryBudgetObject>;
/** One limit object per tenant + limit across runs + subject value (issue 21); named after its tenant (placement). */
export const limitStub = (env: Env, tenantId: string, name: string, subject: string) =>
  modelled(
    env,
    "LimitObject",
    placedStub(env, "LIMITS", `${tenantId}:limit:${JSON.stringify([name, subject])}`),
  ) as unknown as Methods<LimitObject>;
/** One tenant index per tenant (issue 20): fed by the EVENTS consumer, read by the list routes and the console. */
export const indexStub = (env: Env, tenantId: string) =>
  modelled(
    env,
    "IndexObject",
    placedStub(env, "INDEX", tenantId),
  ) as unknown as Methods<IndexObject>;
/** One credential object per tenant + end user + OAuth provider (issue 36); named after its tenant (placement). */
export const credentialStub = (env: Env, tenantId: string, user: string, provider: string) =>
  modelled(
    env,
    "CredentialObject",
    placedStub(env, "CREDENTIALS", `${tenantId}:credential:${JSON.stringify([user, provider])}`),
  ) as unknown as Methods<CredentialObject>;
