import { describe, expect, it } from "vitest";
import { api, manifest, setup, turn, upstream, trace } from "../support/api.ts";

describe("happy path", () => {
  it("runs a write once and returns the upstream result", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    const { runId, name } = await setup(tool);
    const res = await turn(runId, [{ id: "call_1", name, arguments: { amount: 500, currency: "usd" } }]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: "succeeded", result: { id: expect.stringMatching(/^eff_/) } });
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    const events = await trace(runId);
    console.log(JSON.stringify(events), res.headers.get("Toolgate-Rows-Written"));
    expect((await api("GET", "/healthz")).status).toBe(200);
  });
});
