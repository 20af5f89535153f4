// Peek before refusal: a call a budget or a cancel would refuse may be a replay of an operation
// that already exists with this very input (domain/turn/admit.ts, planTurn's `peeked`). Read-only:
// a peek never creates an operation; an unreachable one reads as absent (the call is refused).
import type { Env } from "../env.ts";
import { operationStub } from "../stubs.ts";

/** Asks each operation how it stands (read-only): its input hash, or null (none, or unreachable). */
export async function peekInto(
  env: Env,
  tenantId: string,
  ids: readonly string[],
  into: Map<string, string | null>,
): Promise<void> {
  const seen = await Promise.all(
    ids.map(async (id) => {
      const peek = await operationStub(env, id)
        .peek(tenantId)
        .catch(() => null);
      const hash = peek?.ok
        ? peek.value.input_hash
        : peek?.error.code === "pruned"
          ? peek.error.input_hash
          : null;
      return [id, hash] as const;
    }),
  );
  for (const [id, hash] of seen) into.set(id, hash);
}
