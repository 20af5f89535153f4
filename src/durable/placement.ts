// Where an object lives: the ONE way to reach a Durable Object namespace (stubs.ts calls it for
// every object; a new namespace must be reached through it too — ARCHITECTURE.md). The object's
// name says its jurisdiction (domain/jurisdiction.ts): a tagged name is made through
// `namespace.jurisdiction(j)`, so the object runs and stores its data there; an untagged name
// through the namespace itself, exactly as before jurisdictions existed.
//
// workerd (`wrangler dev`, the vitest pool) throws "Jurisdiction restrictions are not implemented"
// for `jurisdiction()`. In development only, such a name is then made in a separate name space of
// the plain namespace (`jurisdiction:<j>:<name>`), so an EU object and a default one of the same
// name stay two objects, as they are in production. In production the error stands: an object is
// never silently placed outside its tenant's jurisdiction.
//
// The tenant plane's queues are placed here too (eventsQueue, deadLetterQueue): each jurisdiction
// has its own events queue and dead-letter queue, created with that jurisdiction, and every
// producer picks them by the id it sends for. A jurisdiction whose queues are not bound has no
// queue at all (the send fails and the outbox keeps the event): never the default one.
import { isDevelopment } from "../config.ts";
import { jurisdictionOf, type Jurisdiction } from "../domain/jurisdiction.ts";
import type { Env } from "./env.ts";

/**
 * Each jurisdiction's events queue and its dead letters: Env keys and queue names (wrangler.toml).
 * A jurisdiction's queues are created with it (`wrangler queues create <name> --jurisdiction eu`),
 * so Cloudflare stores and processes their messages only there (Queues "Data location").
 */
export const EVENT_QUEUES = {
  none: { events: "EVENTS", deadLetters: "EVENTS_DLQ", deadLetterQueue: "toolgate-events-dlq" },
  eu: {
    events: "EVENTS_EU",
    deadLetters: "EVENTS_EU_DLQ",
    deadLetterQueue: "toolgate-events-eu-dlq",
  },
  fedramp: {
    events: "EVENTS_FEDRAMP",
    deadLetters: "EVENTS_FEDRAMP_DLQ",
    deadLetterQueue: "toolgate-events-fedramp-dlq",
  },
} as const satisfies Record<
  Jurisdiction | "none",
  { events: keyof Env; deadLetters: keyof Env; deadLetterQueue: string }
>;

/** The Env keys that hold a Durable Object namespace (a binding added to Env is one at once). */
export type NamespaceBinding = keyof {
  [
    K in keyof Env as string extends K
      ? never
      : Env[K] extends { idFromName(name: string): DurableObjectId }
        ? K
        : never
  ]: true;
};

/** How a name was placed: by the runtime's jurisdiction, by the development emulation, or not at all. */
export type Placement = {
  binding: NamespaceBinding;
  name: string;
  jurisdiction: Jurisdiction | null;
  via: "jurisdiction" | "emulated" | "default";
  /** The id's string form: equal strings are the same object. */
  id: string;
};

let observer: ((placement: Placement) => void) | null = null;
/**
 * TEST ONLY: called with every placement this isolate makes (the vitest pool runs the Worker, its
 * objects and the tests in one isolate). Nothing else sets it. Returns the function that removes it.
 */
export function observePlacements(fn: (placement: Placement) => void): () => void {
  observer = fn;
  return () => {
    if (observer === fn) observer = null;
  };
}

const NOT_IMPLEMENTED = /not implemented/i;

/** Per namespace and jurisdiction: its sub-namespace, or "emulated" (development on workerd). */
const subspaces = new WeakMap<object, Map<Jurisdiction, DurableObjectNamespace | "emulated">>();
function subspace(
  env: Env,
  namespace: DurableObjectNamespace,
  jurisdiction: Jurisdiction,
): DurableObjectNamespace | "emulated" {
  let known = subspaces.get(namespace);
  const cached = known?.get(jurisdiction);
  if (cached) return cached;
  let made: DurableObjectNamespace | "emulated";
  try {
    made = namespace.jurisdiction(jurisdiction);
  } catch (error) {
    if (!isDevelopment(env) || !NOT_IMPLEMENTED.test(String(error))) throw error;
    made = "emulated";
  }
  if (!known) subspaces.set(namespace, (known = new Map()));
  known.set(jurisdiction, made);
  return made;
}

/** The stub of the object `name` in `binding`, in the jurisdiction the name carries. */
export function placedStub<B extends NamespaceBinding>(
  env: Env,
  binding: B,
  name: string,
): DurableObjectStub {
  const namespace = env[binding] as unknown as DurableObjectNamespace;
  const jurisdiction = jurisdictionOf(name);
  const space = jurisdiction === null ? namespace : subspace(env, namespace, jurisdiction);
  const via: Placement["via"] =
    jurisdiction === null ? "default" : space === "emulated" ? "emulated" : "jurisdiction";
  const id =
    space === "emulated"
      ? namespace.idFromName(`jurisdiction:${jurisdiction}:${name}`)
      : space.idFromName(name);
  observer?.({ binding, name, jurisdiction, via, id: id.toString() });
  return (space === "emulated" ? namespace : space).get(id);
}

/** The queues of the jurisdiction `name` carries (a tenant, run or operation id). */
function queuesOf(env: Env, name: string) {
  const jurisdiction = jurisdictionOf(name);
  const names = EVENT_QUEUES[jurisdiction ?? "none"];
  return { jurisdiction, names, events: env[names.events], deadLetters: env[names.deadLetters] };
}

/**
 * The events queue for what `name` (a tenant, run or operation id) sends: its jurisdiction's.
 * Throws when that queue is not bound: the caller's send fails and its outbox keeps the event.
 */
export function eventsQueue(env: Env, name: string): Env["EVENTS"] {
  const placed = queuesOf(env, name);
  if (!placed.events) throw unbound(placed.jurisdiction, placed.names.events);
  return placed.events as Env["EVENTS"];
}

/** The dead-letter queue for what `name` sends (dead-letters.ts parks there); throws when unbound. */
export function deadLetterQueue(env: Env, name: string): Env["EVENTS_DLQ"] {
  const placed = queuesOf(env, name);
  if (!placed.deadLetters) throw unbound(placed.jurisdiction, placed.names.deadLetters);
  return placed.deadLetters as Env["EVENTS_DLQ"];
}

/** Whether this deployment has both queues of `jurisdiction` (a tenant is created there only then). */
export const eventQueuesBound = (env: Env, jurisdiction: Jurisdiction): boolean =>
  Boolean(env[EVENT_QUEUES[jurisdiction].events] && env[EVENT_QUEUES[jurisdiction].deadLetters]);

/** Whether a batch came from one of the dead-letter queues (index.ts routes it to its consumer). */
export const isDeadLetterQueue = (queue: string): boolean =>
  Object.values(EVENT_QUEUES).some((names) => names.deadLetterQueue === queue);

const unbound = (jurisdiction: Jurisdiction | null, binding: string) =>
  new Error(
    `no ${binding} queue is bound (wrangler.toml): an event of jurisdiction ${jurisdiction} is never sent through another jurisdiction's queue`,
  );
