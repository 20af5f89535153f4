// The trace's hash chain (issue 10): `seal` numbers each event and chains it to the previous one by
// SHA-256 over its canonical JSON (without `hash`, so with `prev_hash`), and `verifyChain` walks a
// stored log in order and says exactly where it was changed, removed from or written unsealed.
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";
import type { TraceEvent } from "./operation/index.ts";

export type ChainLink = { seq: number; hash: string };
/** `prev_hash` of the first event: the chain starts from nothing. */
export const GENESIS_HASH = "0".repeat(64);

export const sha256HexSync = (text: string): string =>
  createHash("sha256").update(text).digest("hex");

/** The hash an event carries: SHA-256 of its canonical JSON without `hash` (so with `prev_hash`). */
export function eventHash(event: TraceEvent): string {
  const { hash: _hash, ...rest } = event;
  return sha256HexSync(canonicalJson(rest));
}

/** Numbers and links `events` after `last` (null: the first events of the log). JSON-normalized first, as stored. */
export function seal(events: readonly TraceEvent[], last: ChainLink | null): TraceEvent[] {
  let seq = last?.seq ?? 0;
  let prev = last?.hash ?? GENESIS_HASH;
  return events.map((raw) => {
    const event = JSON.parse(JSON.stringify(raw)) as TraceEvent;
    seq += 1;
    const linked: TraceEvent = { ...event, seq, prev_hash: prev };
    const hash = eventHash(linked);
    prev = hash;
    return { ...linked, hash };
  });
}

export type ChainBreak = {
  seq: number;
  type: string;
  /** `hash_mismatch`: this event was changed; `chain_broken`: an event before it was removed or replaced; `unsealed`: written without a hash. */
  reason: "hash_mismatch" | "chain_broken" | "sequence_gap" | "unsealed";
};
export type ChainCheck =
  | { ok: true; events: number; head_hash: string | null }
  | { ok: false; events: number; broken_at: ChainBreak };

/** Walks the log in order; the first event that does not check out is where the chain breaks. */
export function verifyChain(events: readonly TraceEvent[]): ChainCheck {
  let prev = GENESIS_HASH;
  for (const [index, event] of events.entries()) {
    const at = (reason: ChainBreak["reason"]): ChainCheck => ({
      ok: false,
      events: events.length,
      broken_at: {
        seq: typeof event.seq === "number" ? event.seq : index + 1,
        type: event.type,
        reason,
      },
    });
    if (typeof event.hash !== "string" || typeof event.prev_hash !== "string")
      return at("unsealed");
    if (event.seq !== index + 1) return at("sequence_gap");
    if (event.prev_hash !== prev) return at("chain_broken");
    if (eventHash(event) !== event.hash) return at("hash_mismatch");
    prev = event.hash;
  }
  return { ok: true, events: events.length, head_hash: events.length > 0 ? prev : null };
}
