// Duplicates of every kind map to one logical operation and one effect: the same turn posted
// twice, the model re-proposing a write with a new call id, and many identical turns at once.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  upstream,
} from "../support/api.ts";

const charge = { amount: 1200, currency: "usd" };

describe("deduplication", () => {
  it("the same turn posted twice returns the same turn and executes once", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const calls = [{ id: "c1", name, arguments: charge }];
    const a = await turn(runId, calls);
    const b = await turn(runId, calls);
    expect(b.body).toEqual(a.body);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a re-proposal with a new call id maps to the same operation and gets the stored result", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const a = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    // Same arguments, different key order and call id: same frozen input.
    const b = await turn(runId, [
      { id: "c2", name, arguments: JSON.stringify({ currency: "usd", amount: 1200 }) },
    ]);
    expect(b.body.turn_id).not.toBe(a.body.turn_id);
    expect(b.body.results[0]).toEqual(a.body.results[0]);
    expect((await up.state()).effects).toHaveLength(1);
    // A different amount is a different decision: a new operation and a second effect.
    const c = await turn(runId, [{ id: "c3", name, arguments: { amount: 1300, currency: "usd" } }]);
    expect(c.body.results[0].operation_id).not.toBe(a.body.results[0].operation_id);
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("a rotated TOOLGATE_SIGNING_KEY never changes the key of an operation in flight: the retry and a re-proposal keep it", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 429 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    // The run now derives keys from another signing key; the operation keeps the one in its plan.
    const run = (env as any).RUNS.get((env as any).RUNS.idFromName(runId));
    await (runInDurableObject as any)(run, (instance: any) => {
      instance.env = { ...instance.env, TOOLGATE_SIGNING_KEY: "rotated-signing-key" };
    });
    const again = await turn(runId, [{ id: "c2", name, arguments: charge }]);
    expect(again.body.results[0].operation_id).toBe(operationId);
    expect(await fireAlarm(operationId)).toBe(true);
    expect((await operation(operationId)).body.result.status).toBe("succeeded");
    const keys = (await up.state()).requests.map((r) => r.key);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect((await operation(operationId)).body.idempotency_key).toBe(keys[0]);
    // A new operation under the rotated key gets a key of its own.
    const other = await turn(runId, [
      { id: "c3", name, arguments: { amount: 1201, currency: "usd" } },
    ]);
    const third = (await up.state()).requests[2]!.key;
    expect(third).toMatch(/^tg_[0-9a-f]{32}$/);
    expect(third).not.toBe(keys[0]);
    // Neither key can be read off the operation id the model sees.
    expect(keys[0]).not.toBe(`tg_${operationId.slice(3)}`);
    expect(third).not.toBe(`tg_${(other.body.results[0].operation_id as string).slice(3)}`);
  });

  it("calls in one turn run concurrently", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 8_000 }));
    await up.script({ kind: "hang" });
    const res = await turn(
      runId,
      [
        { id: "c1", name, arguments: charge },
        { id: "c2", name, arguments: { ...charge, amount: 1 } },
      ],
      0,
    );
    expect(res.status).toBe(202);
    await up.waitForRequests(2);
    // Both calls reached the upstream while one of them (whichever took the hang) is still in flight.
    const phases = await Promise.all(
      res.body.results.map(
        async (e: { operation_id: string }) =>
          (await api("GET", `/v1/operations/${e.operation_id}`)).body.phase,
      ),
    );
    expect(phases).toContain("executing");
    expect((await up.state()).requests).toHaveLength(2);
  });

  it("20 concurrent identical turns produce one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "slow", delayMs: 150 });
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => turn(runId, [{ id: "c1", name, arguments: charge }])),
    );
    const ids = new Set(responses.map((r) => r.body.results[0].result?.id));
    expect(
      responses.every((r) => r.status === 200 && r.body.results[0].status === "succeeded"),
    ).toBe(true);
    expect(ids.size).toBe(1);
    const state = await up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
  });

  it("20 concurrent re-proposals with distinct call ids produce one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "slow", delayMs: 150 });
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => turn(runId, [{ id: `c${i}`, name, arguments: charge }])),
    );
    expect(new Set(responses.map((r) => r.body.results[0].operation_id)).size).toBe(1);
    expect(responses.every((r) => r.body.results[0].status === "succeeded")).toBe(true);
    expect((await up.state()).effects).toHaveLength(1);
    expect((await trace(runId)).filter((e) => e.type === "attempt_started")).toHaveLength(1);
  });

  it("same business key with a changed amount is an idempotency_conflict; still one effect", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          order_id: { type: "string" },
          amount: { type: "number", exclusiveMinimum: 0 },
        },
        required: ["order_id", "amount"],
      },
      request: { method: "POST", url: `${up.url}/orders/{order_id}/refunds` },
      operation_key: ["order_id"],
    });
    const { runId, name } = await setup(tool);
    const a = await turn(runId, [
      { id: "c1", name, arguments: { order_id: "ord/1 7", amount: 20 } },
    ]);
    expect(a.body.results[0].status).toBe("succeeded");
    const b = await turn(runId, [
      { id: "c2", name, arguments: { order_id: "ord/1 7", amount: 25 } },
    ]);
    expect(b.body.results[0]).toMatchObject({
      status: "rejected",
      code: "idempotency_conflict",
      operation_id: a.body.results[0].operation_id,
    });
    expect(b.body.results[0].message).toMatch(/Do not retry/);
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    // Path parameters are encoded: the argument cannot add path segments.
    expect(state.requests[0]!.path).toBe("/orders/ord%2F1%207/refunds");
  });
});
