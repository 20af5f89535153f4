// Definite outcomes are recorded once and never retried: each case sends exactly one request and
// leaves no alarm behind.
import { describe, expect, it } from "vitest";
import { fireAlarm, manifest, setup, turn, upstream, automaticWork } from "../support/api.ts";

const cases = [
  {
    name: "400",
    fault: { kind: "status", status: 400 },
    status: "rejected",
    code: "invalid_arguments",
  },
  {
    name: "422",
    fault: { kind: "status", status: 422 },
    status: "rejected",
    code: "invalid_arguments",
  },
  {
    name: "401",
    fault: { kind: "status", status: 401 },
    status: "failed",
    code: "upstream_forbidden",
  },
  {
    name: "404",
    fault: { kind: "status", status: 404 },
    status: "failed",
    code: "permanent_failure",
  },
  {
    name: "410",
    fault: { kind: "status", status: 410 },
    status: "failed",
    code: "permanent_failure",
  },
  {
    name: "invalid JSON output",
    fault: { kind: "invalid_json" },
    status: "failed",
    code: "invalid_output",
    effects: 1,
  },
  {
    name: "a response over the 1 MiB cap",
    fault: { kind: "huge", bytes: 2 * 1024 * 1024 },
    status: "failed",
    code: "invalid_output",
    effects: 1,
  },
  {
    name: "output not matching the schema",
    fault: { kind: "wrong_shape" },
    status: "failed",
    code: "invalid_output",
    effects: 1,
  },
] as const;

describe("terminal outcomes", () => {
  for (const c of cases) {
    it(`${c.name} → ${c.status}/${c.code}, never retried`, async () => {
      const up = upstream();
      const { runId, name } = await setup(manifest({ url: up.url }));
      await up.script(c.fault);
      const res = await turn(runId, [
        { id: "c1", name, arguments: { amount: 1, currency: "eur" } },
      ]);
      expect(res.status).toBe(200);
      expect(res.body.results[0]).toMatchObject({ status: c.status, code: c.code });
      expect(res.body.results[0].message).toMatch(/[Dd]o not/);
      const operationId = res.body.results[0].operation_id as string;
      expect(await automaticWork(operationId)).toBe(false);
      const state = await up.state();
      expect(state.requests).toHaveLength(1);
      expect(state.effects).toHaveLength("effects" in c ? c.effects : 0);
      // A replay returns the stored failure; still one request.
      const again = await turn(runId, [
        { id: "c2", name, arguments: { amount: 1, currency: "eur" } },
      ]);
      expect(again.body.results[0]).toMatchObject({
        status: c.status,
        code: c.code,
        operation_id: operationId,
      });
      expect((await up.state()).requests).toHaveLength(1);
    });
  }

  it("a redirect answering a read → failed/permanent_failure (not followed), never retried", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({
        url: up.url,
        risk: "read",
        request: { method: "GET", url: `${up.url}/orders/{currency}` },
      }),
    );
    await up.script({ kind: "redirect", location: "http://127.0.0.1:1/elsewhere" });
    const res = await turn(runId, [{ id: "c1", name, arguments: { amount: 1, currency: "eur" } }]);
    expect(res.body.results[0]).toMatchObject({
      status: "failed",
      code: "permanent_failure",
      message: expect.stringMatching(/redirect/),
    });
    expect(await automaticWork(res.body.results[0].operation_id)).toBe(false);
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("a 5xx on a write with neither key nor lookup is outcome_unknown and is not retried", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, idempotency: { mode: "none" } }));
    await up.script({ kind: "status", status: 503 });
    const res = await turn(runId, [{ id: "c1", name, arguments: { amount: 1, currency: "eur" } }]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "upstream_error_unknown",
      allowed_next_actions: ["wait", "check_status", "tell_user"],
    });
    expect(await fireAlarm(res.body.results[0].operation_id)).toBe(false);
    expect((await up.state()).requests).toHaveLength(1);
  });
});
