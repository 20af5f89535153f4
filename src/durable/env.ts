// The Worker's bindings: the Durable Object namespaces (named by their classes) and the plain
// variables of config.ts. Type-only: the objects read their settings through config.ts's readers.
import type { DeploymentVars } from "../config.ts";
import type { EventMessage } from "../domain/journal/events.ts";
import type { LimitObject } from "./limit/object.ts";
import type { CredentialObject } from "./credential/object.ts";
import type { IndexObject } from "./index/object.ts";
import type { OperationObject } from "./operation/object.ts";
import type { ResourceLockObject } from "./resource-lock-object.ts";
import type { RetryBudgetObject } from "./retry-budget-object.ts";
import type { RunObject } from "./run/object.ts";
import type { TenantObject } from "./tenant/object.ts";

export type Env = {
  OPERATIONS: DurableObjectNamespace<OperationObject>;
  RUNS: DurableObjectNamespace<RunObject>;
  TENANTS: DurableObjectNamespace<TenantObject>;
  LOCKS: DurableObjectNamespace<ResourceLockObject>;
  BUDGETS: DurableObjectNamespace<RetryBudgetObject>;
  /** Limits across runs (issue 21): one object per tenant + limit + subject. */
  LIMITS: DurableObjectNamespace<LimitObject>;
  /** The tenant index (issue 20): one per tenant, fed by the EVENTS consumer. */
  INDEX: DurableObjectNamespace<IndexObject>;
  /** Per-user OAuth tokens (issue 36): one object per tenant + end user + provider. */
  CREDENTIALS: DurableObjectNamespace<CredentialObject>;
  /** The tenant plane's events (issue 18): producers are the objects' outboxes, the consumer index.ts. */
  EVENTS: Queue<EventMessage>;
  /** EVENTS' dead letters, re-parked with long delays by their consumer (events/dead-letters.ts). */
  EVENTS_DLQ: Queue<EventMessage & { parked?: number }>;
  /**
   * The same two queues per jurisdiction, created with it (placement.ts EVENT_QUEUES): an EU
   * tenant's events go only through these. Unbound: no tenant is created in that jurisdiction.
   */
  EVENTS_EU?: Queue<EventMessage>;
  EVENTS_EU_DLQ?: Queue<EventMessage & { parked?: number }>;
  EVENTS_FEDRAMP?: Queue<EventMessage>;
  EVENTS_FEDRAMP_DLQ?: Queue<EventMessage & { parked?: number }>;
} & DeploymentVars;
