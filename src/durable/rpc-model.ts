// The latency model (issue 19), development only: every RPC to an object class named in
// TOOLGATE_DEV_RPC_DELAY waits that many ms first, as if the object lived on another continent;
// and every RPC to a TenantObject (or a delayed class, or one a test asked to count) is counted
// by method, so a test can prove that a path makes none to the tenant.
// Applied once, where stubs are made (stubs.ts); outside development the stub is returned as is.
import { devRpcDelays, isDevelopment, type DeploymentVars, type ObjectClass } from "../config.ts";

/** By "Class.method": the RPCs made so far in this isolate (development deployments only). */
const counts = new Map<string, number>();

/** Counted without a delay: the TenantObject always, and what a test asked for (`countRpcs`). */
const counted = new Set<ObjectClass>(["TenantObject"]);

/**
 * Counts every RPC to objects of `cls` made through stubs made from now on (this isolate,
 * development only), until the returned stop. The wrapper changes the timing of what it wraps,
 * so a test asks for it around what it counts.
 */
export function countRpcs(cls: ObjectClass): () => void {
  const added = !counted.has(cls);
  counted.add(cls);
  return () => void (added && counted.delete(cls));
}

/** Every RPC made so far, by "Class.method" (GET /v1/admin/stats, development only). */
export const allRpcCounts = (): Record<string, number> => Object.fromEntries(counts);

/** The RPCs made so far to objects of `cls`, by method. */
export const rpcCounts = (cls: ObjectClass): Record<string, number> =>
  Object.fromEntries(
    [...counts]
      .filter(([key]) => key.startsWith(`${cls}.`))
      .map(([key, n]) => [key.slice(cls.length + 1), n]),
  );

export function modelled<S extends object>(env: DeploymentVars, cls: ObjectClass, stub: S): S {
  if (!isDevelopment(env)) return stub;
  const delayMs = devRpcDelays(env)[cls];
  // Only what is asked for: a class with a delay, and the TenantObject (counted: issue 19's
  // promise is that no call's path reaches it) or a class a test counts. The wrapper changes the
  // timing of what it wraps (the retry budget's tests noticed), so every other stub stays
  // exactly the platform's.
  if (delayMs === undefined && !counted.has(cls)) return stub;
  return new Proxy(stub, {
    get(target, property) {
      const member: unknown = Reflect.get(target, property);
      // `then` is asked by `await`; `fetch` and the id are not RPC methods of ours.
      if (typeof property !== "string" || property === "then" || typeof member !== "function")
        return member;
      return async (...args: unknown[]) => {
        const key = `${cls}.${property}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
        if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
        // Called as a method of the stub: an RPC property has no `.apply` of its own (it would be an RPC).
        return (target as Record<string, (...a: unknown[]) => Promise<unknown>>)[property]!(
          ...args,
        );
      };
    },
  });
}
