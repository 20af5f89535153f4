// The native turn format: { calls: [{ id, name, arguments }] } in, envelopes out (call order).
import { z } from "zod";
import type { ProposedCall } from "../domain/gate.ts";

export const MAX_CALLS_PER_TURN = 64;
export const MAX_ARGUMENT_BYTES = 32 * 1024;

export const NativeTurn = z.object({
  calls: z
    .array(z.object({ id: z.string().min(1).max(128), name: z.string().min(1).max(128), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}) }))
    .min(1)
    .max(MAX_CALLS_PER_TURN),
});

export function parseNativeTurn(body: unknown): { ok: true; calls: ProposedCall[] } | { ok: false; detail: string } {
  const parsed = NativeTurn.safeParse(body);
  if (!parsed.success) return { ok: false, detail: z.prettifyError(parsed.error) };
  const ids = new Set<string>();
  for (const call of parsed.data.calls) {
    if (ids.has(call.id)) return { ok: false, detail: `duplicate call id ${call.id} in one turn` };
    ids.add(call.id);
  }
  return { ok: true, calls: parsed.data.calls };
}
