// Worker entry: the HTTP app, the EVENTS queue consumer (and its dead letters') and the Durable
// Object classes.
import type { EventMessage } from "./domain/journal/events.ts";
import type { Env } from "./durable/env.ts";
import { handleEventBatch } from "./events/consumer.ts";
import { handleDeadLetters } from "./events/dead-letters.ts";
import { isDeadLetterQueue } from "./durable/placement.ts";
import { app } from "./http/app.ts";

export { IndexObject } from "./durable/index/object.ts";
export { LimitObject } from "./durable/limit/object.ts";
export { CredentialObject } from "./durable/credential/object.ts";
export { OperationObject } from "./durable/operation/object.ts";
export { ResourceLockObject } from "./durable/resource-lock-object.ts";
export { RetryBudgetObject } from "./durable/retry-budget-object.ts";
export { RunObject } from "./durable/run/object.ts";
export { TenantObject } from "./durable/tenant/object.ts";

export default {
  fetch: app.fetch,
  queue: (batch: MessageBatch<EventMessage>, env: Env) =>
    // Every jurisdiction's dead-letter queue (durable/placement.ts EVENT_QUEUES) has this consumer.
    isDeadLetterQueue(batch.queue) ? handleDeadLetters(batch, env) : handleEventBatch(batch, env),
} satisfies ExportedHandler<Env, EventMessage>;
