// What undo (issue 22) shows to the backend and to people, through the Worker's public HTTP API:
// toolgate/client's `compensate` and `cancelRun({ rollback: true })` get each charge refunded once,
// however often and however concurrently they ask, and are told what happened; the console's run
// page shows the run's mode and each rollback step as the run reports it.
import { env, exports } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { Toolgate, ToolgateProblem } from "../../src/client/index.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { ADMIN, api, manifest, newTenant, unique, upstream } from "../support/api.ts";
import { consolePage } from "../support/console-page.ts";

const worker = (exports as unknown as { default: Fetcher }).default;
const backend = (apiKey: string) =>
  new Toolgate({
    baseUrl: "http://toolgate.test",
    apiKey,
    fetch: ((url: string | URL, init?: RequestInit) =>
      worker.fetch(new Request(url, init))) as typeof fetch,
    attempts: 1,
  });
const as = (key: string) => ({ Authorization: `Bearer ${key}` });

/** A tenant with a refund tool and a charge tool that declares it; a run that charged 100 then 200. */
async function chargedTwice() {
  const { key, tenantId } = await newTenant([
    "tools:write",
    "runs:write",
    "runs:read",
    "approvals:decide",
    "traces:read",
    "operations:compensate",
  ]);
  const up = upstream();
  const refund = manifest({
    url: up.url,
    name: unique("refund"),
    description: "Refund a charge.",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: { charge_id: { type: "string" }, amount: { type: "integer" } },
      required: ["charge_id", "amount"],
    },
    request: { method: "POST", url: `${up.url}/refunds` },
  });
  const charge = manifest({
    url: up.url,
    compensate: {
      tool: refund.name,
      arguments: { charge_id: "{result.id}", amount: "{input.amount}" },
    },
  });
  for (const tool of [refund, charge])
    expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool, as(key))).status).toBe(201);
  const client = backend(key);
  const run = await client.createRun({
    user: { id: "u1", scopes: [] },
    tools: [charge.name as string],
  });
  const charges = [];
  for (const amount of [100, 200]) {
    const call = {
      id: unique("c"),
      name: charge.name as string,
      arguments: { amount, currency: "usd" },
    };
    const res = await api(
      "POST",
      `/v1/runs/${run.run_id}/turns`,
      { calls: [call] },
      {
        ...as(key),
        Prefer: "wait=5",
      },
    );
    expect(res.body.results[0].status, JSON.stringify(res.body)).toBe("succeeded");
    charges.push(res.body.results[0] as { operation_id: string; result: { id: string } });
  }
  return { tenantId, key, up, client, runId: run.run_id, charges };
}

const refundsOf = async (up: ReturnType<typeof upstream>) =>
  (await up.state()).effects
    .filter((e) => e.path.endsWith("/refunds"))
    .map((e) => [e.body.charge_id, e.body.amount]);

describe("toolgate/client: undo", { timeout: 30_000 }, () => {
  it("compensate asked three times at once: one compensation (created once), approved by a person, one refund of that charge; the original links to it", async () => {
    const { up, client, charges } = await chargedTwice();
    const [first] = charges;
    const asked = await Promise.all(
      [1, 2, 3].map(() => client.compensate(first!.operation_id, { reason: "customer asked" })),
    );
    expect(asked.filter((a) => a.created)).toHaveLength(1);
    const ids = new Set(asked.map((a) => a.operation.operation_id));
    expect(ids.size).toBe(1);
    const [compensationId] = [...ids];
    expect(asked[0]!.operation).toMatchObject({
      compensates: first!.operation_id,
      phase: "awaiting_approval",
      approval: { state: "pending", compensates: first!.operation_id },
    });
    expect(await refundsOf(up)).toEqual([]); // nothing before a person approves
    await client.approve(compensationId!);
    const done = await client.operation(compensationId!, 5000);
    expect(done).toMatchObject({ phase: "recorded", result: { status: "succeeded" } });
    expect((await client.operation(first!.operation_id)).compensated_by).toBe(compensationId);
    expect(await refundsOf(up)).toEqual([[first!.result.id, 100]]);
    // Asked again afterwards: the same one, not created, nothing more sent.
    const again = await client.compensate(first!.operation_id, { reason: "asked twice" });
    expect(again).toMatchObject({ created: false, operation: { operation_id: compensationId } });
    expect(await refundsOf(up)).toEqual([[first!.result.id, 100]]);
  });

  it("cancelRun with rollback after one charge was compensated by hand: the other is refunded, the first is not refunded again, the console shows each step as the run reports it; a plain cancel reports no rollback", async () => {
    const { key, up, client, runId, charges } = await chargedTwice();
    const [first, second] = charges;
    const manual = await client.compensate(first!.operation_id, { reason: "by hand" });
    await client.approve(manual.operation.operation_id);
    await client.operation(manual.operation.operation_id, 5000);

    const cancelled = await client.cancelRun(runId, { rollback: true });
    expect(cancelled).toMatchObject({ status: "cancelled", rollback: { state: "running" } });
    expect(cancelled.rollback!.steps.map((s) => [s.operation_id, s.state])).toEqual([
      [second!.operation_id, "submitted"],
      [first!.operation_id, "pending"],
    ]);
    // The console's run page, as a person sees it while the first refund waits for approval.
    const stepsOf = (html: string) =>
      [...html.matchAll(/<li data-state="(\w+)">[\s\S]*?href="#(op_\w+)"/g)].map((m) => [
        m[1],
        m[2],
      ]);
    const running = await consolePage(`/console/runs/${runId}`, key);
    expect(running).toContain("Rollback");
    expect(running).toMatch(/<dt>Mode<\/dt>\s*<dd>live<\/dd>/);
    expect(stepsOf(running)).toEqual([
      ["submitted", second!.operation_id],
      ["pending", first!.operation_id],
    ]);
    await client.approve(cancelled.rollback!.steps[0]!.compensation_id!);
    await client.operation(cancelled.rollback!.steps[0]!.compensation_id!, 5000);
    await runDurableObjectAlarm(placedStub(env as unknown as Env, "RUNS", runId) as never);
    const after = await client.cancelRun(runId, { rollback: true });
    expect(after.rollback).toMatchObject({ state: "completed" });
    expect(after.rollback!.steps.map((s) => [s.state, s.compensation_id])).toEqual([
      ["compensated", expect.any(String)],
      ["compensated", manual.operation.operation_id],
    ]);
    const completed = await consolePage(`/console/runs/${runId}`, key);
    expect(stepsOf(completed)).toEqual([
      ["compensated", second!.operation_id],
      ["compensated", first!.operation_id],
    ]);
    expect(completed).toContain(
      `undone by <a class="mono" href="#${manual.operation.operation_id}"`,
    );
    expect((await refundsOf(up)).sort()).toEqual(
      [
        [first!.result.id, 100],
        [second!.result.id, 200],
      ].sort(),
    );

    const other = await chargedTwice();
    const plain = await other.client.cancelRun(other.runId);
    expect(plain.status).toBe("cancelled");
    expect(plain.rollback).toBeUndefined();
    expect(await refundsOf(other.up)).toEqual([]);
  });

  it("a key of the same tenant without operations:compensate: a typed 403 from compensate and from cancelRun with rollback; nothing refunded, the run still active", async () => {
    const { tenantId, key, up, runId, charges } = await chargedTwice();
    const issued = await api(
      "POST",
      `/v1/admin/tenants/${tenantId}/keys`,
      { name: "weak", scopes: ["runs:write", "runs:read"] },
      as(ADMIN),
    );
    expect(issued.status).toBe(201);
    const weak = backend(issued.body.key as string);
    for (const attempt of [
      () => weak.compensate(charges[0]!.operation_id, { reason: "x" }),
      () => weak.cancelRun(runId, { rollback: true }),
    ]) {
      const refused = await attempt().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ToolgateProblem);
      expect((refused as ToolgateProblem).status).toBe(403);
    }
    expect(await refundsOf(up)).toEqual([]);
    expect((await api("GET", `/v1/runs/${runId}`, undefined, as(key))).body.status).toBe("active");
  });
});
