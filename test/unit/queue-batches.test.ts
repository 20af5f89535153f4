// Every sendBatch cut to the queue's limits (issue 38, E5): at most 100 messages and 250,000 bytes
// of bodies (256 KB less a margin) per batch, in order, nothing lost or repeated.
import { describe, expect, it } from "vitest";
import {
  boundedBytes,
  messageBytes,
  QUEUE_BATCH_MAX_BYTES,
  QUEUE_BATCH_MAX_MESSAGES,
  queueBatches,
  sendInBatches,
} from "../../src/events/queue-batches.ts";

const body = (chars: number) => ({ kind: "event", pad: "x".repeat(chars) });
const cut = (sizes: number[]) =>
  queueBatches(sizes, (chars) => body(chars)).map((batch) => batch.length);

describe("queueBatches", () => {
  it.each([
    ["none", [], []],
    ["one", [10], [1]],
    ["100 small", Array(100).fill(10), [100]],
    ["101 small", Array(101).fill(10), [100, 1]],
    ["250 small", Array(250).fill(10), [100, 100, 50]],
    // 40 KB bodies: six fit under 250,000 bytes, a seventh would not.
    ["ten of 40 KB", Array(10).fill(40_000), [6, 4]],
    // A body alone over the limit still goes (alone): the queue says whether it takes it.
    ["one too big between small ones", [10, 300_000, 10], [1, 1, 1]],
  ])("%s → %j", (_name, sizes, expected) => {
    expect(cut(sizes as number[])).toEqual(expected);
  });

  it("keeps the order, and every batch within the limits", () => {
    const sizes = Array.from({ length: 500 }, (_, i) => (i * 7919) % 9_000);
    const batches = queueBatches(sizes, body);
    expect(batches.flat()).toEqual(sizes);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(QUEUE_BATCH_MAX_MESSAGES);
      const bytes = batch.reduce((sum, chars) => sum + messageBytes(body(chars)), 0);
      expect(bytes).toBeLessThanOrEqual(QUEUE_BATCH_MAX_BYTES);
    }
  });

  it("a bound from the stored JSON (no stringify) keeps every batch within the limits, multibyte text included", () => {
    // What an outbox sends: an event whose stored JSON it holds, wrapped in { kind, event }.
    const events = Array.from({ length: 300 }, (_, i) => ({
      id: `e${i}`,
      pad: "é€😀".repeat(i * 37),
    }));
    const batches = queueBatches(
      events,
      (event) => ({ kind: "event", event }),
      (event) => boundedBytes(JSON.stringify(event)),
    );
    expect(batches.flat()).toEqual(events);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(QUEUE_BATCH_MAX_MESSAGES);
      const bytes = batch.reduce((sum, event) => sum + messageBytes({ kind: "event", event }), 0);
      expect(bytes).toBeLessThanOrEqual(QUEUE_BATCH_MAX_BYTES);
    }
  });

  it("counts bytes, not characters", () => {
    expect(messageBytes("é")).toBe(messageBytes("e") + 1);
  });
});

describe("sendInBatches", () => {
  it("reports each batch the queue took, and stops at the first refusal", async () => {
    const sent: number[][] = [];
    let calls = 0;
    const queue = {
      sendBatch: async () => {
        calls += 1;
        if (calls === 2) throw new Error("queue unavailable");
      },
    };
    const items = Array.from({ length: 250 }, (_, i) => i);
    await expect(
      sendInBatches(
        queue as never,
        items,
        (i) => ({ body: { i } }),
        (batch) => void sent.push(batch),
      ),
    ).rejects.toThrow("queue unavailable");
    expect(calls).toBe(2);
    expect(sent).toEqual([items.slice(0, 100)]);
  });
});
