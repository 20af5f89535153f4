// Worker entry: the HTTP app and the Durable Object classes it routes to.
import { app } from "./http/app.ts";

export { OperationObject } from "./durable/operation/object.ts";
export { ResourceLockObject } from "./durable/resource-lock-object.ts";
export { RetryBudgetObject } from "./durable/retry-budget-object.ts";
export { RunObject } from "./durable/run/object.ts";
export { TenantObject } from "./durable/tenant/object.ts";

export default app;
