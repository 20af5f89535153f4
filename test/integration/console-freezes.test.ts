// The console's hands in an incident (issue 34) through the public HTTP surface, counted at the
// upstream: the Freezes page creates a hold (same schema as the API: a bad origin or a missing CSRF
// token freezes nothing), the held call's page names the freeze with a link, Lift sends it once; on
// a retrying call's page Pause / Resume / Retry now appear only when they apply and give one effect.
import { describe, expect, it } from "vitest";
import {
  api,
  manifest,
  newTenant,
  operation,
  setup,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { consoleAs } from "../support/console-page.ts";

const freezeIds = async () =>
  (await api("GET", "/v1/freezes")).body.freezes.map((f: { id: string }) => f.id) as string[];

describe("console: freezes", () => {
  it("the Freezes page freezes a tool (hold); the held call's page names it; Lift sends it once", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const people = await consoleAs((await testTenant()).key);
    const home = await people.get("/console");
    expect(home.text).toContain('href="/console/freezes"');

    const id = unique("fz");
    const made = await people.post("/console/freezes", {
      id,
      scope: "tool",
      value: name,
      mode: "hold",
      reason: "refund spike",
    });
    expect(made.status).toBe(303);
    const page = await people.get("/console/freezes");
    expect(page.text).toContain(`Freeze ${id} is in force`);
    expect(page.text).toContain(`data-freeze="${id}"`);
    expect(page.text).toContain(`aria-label="Lift ${id}"`);
    expect(await freezeIds()).toContain(id);

    const held = (
      await turn(runId, [{ id: "c1", name, arguments: { amount: 4, currency: "usd" } }], 0)
    ).body.results[0];
    expect(held).toMatchObject({ code: "frozen" });
    const opPage = await people.get(`/console/operations/${held.operation_id}`);
    expect(opPage.text).toContain('data-held="freeze"');
    expect(opPage.text).toContain(`href="/console/freezes#freeze-${id}"`);
    // Held by a freeze: no person's control applies (lift the freeze instead).
    for (const label of [">Pause<", ">Resume<", ">Retry now<"])
      expect(opPage.text).not.toContain(label);
    expect((await up.state()).requests).toHaveLength(0);

    const lift = await people.post(`/console/freezes/${id}/lift`, {});
    expect(lift.status).toBe(303);
    const after = await people.get("/console/freezes");
    expect(after.text).toContain(`Freeze ${id} lifted`);
    expect(after.text).not.toContain(`aria-label="Lift ${id}"`);
    expect(after.text).toContain(`data-freeze="${id}"`); // now under Lifted
    await up.waitForEffects(1);
    expect((await operation(held.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("bad input freezes nothing: a bad origin, a past expiry, no CSRF token, a read-only key", async () => {
    const people = await consoleAs((await testTenant()).key);
    const [bad, past, forged] = [unique("fz"), unique("fz"), unique("fz")];
    const common = { mode: "hold", reason: "r" };
    await people.post("/console/freezes", {
      id: bad,
      scope: "origin",
      value: "https://api.example.com/path",
      ...common,
    });
    expect((await people.get("/console/freezes")).text).toContain("Nothing was frozen");
    await people.post("/console/freezes", {
      id: past,
      scope: "tenant",
      expires_at: "2001-01-01T00:00",
      ...common,
    });
    expect((await people.get("/console/freezes")).text).toContain("not in the future");
    const noToken = await people.post(
      "/console/freezes",
      { id: forged, scope: "tenant", ...common },
      false,
    );
    expect(noToken.status).toBe(403);
    const reader = await newTenant(["runs:read"]);
    const readOnly = await consoleAs(reader.key);
    const seen = await readOnly.get("/console/freezes");
    expect(seen.status).toBe(200);
    expect(seen.text).not.toContain('action="/console/freezes"');
    expect(
      (await readOnly.post("/console/freezes", { id: forged, scope: "tenant", ...common })).status,
    ).toBe(403);
    const ids = await freezeIds();
    for (const id of [bad, past, forged]) expect(ids).not.toContain(id);
  });
});

describe("console: tripwires", () => {
  it("the Freezes page lists the tenant's tripwires (measure, tool, subject, window, threshold, then) and the freezes each made, linked both ways", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const id = unique("tw");
    const put = await api("PUT", `/v1/tripwires/${id}`, {
      measure: "sum(amount)",
      tool: name,
      window: "1h",
      threshold: 5,
      then: { mode: "refuse", reason: "refund volume" },
    });
    expect(put.status).toBe(201);
    const people = await consoleAs((await testTenant()).key);
    const before = (await people.get("/console/freezes")).text;
    const row = (text: string) =>
      text.slice(
        text.indexOf(`data-tripwire="${id}"`),
        text.indexOf("</tr>", text.indexOf(`data-tripwire="${id}"`)),
      );
    expect(before).toContain(`id="tripwire-${id}"`);
    for (const cell of ["sum(amount)", name, "tenant", "1h", ">5<", "refuse", "refund volume"])
      expect(row(before)).toContain(cell);
    expect(row(before)).toContain("none");

    const call = (amount: number) =>
      turn(runId, [{ id: unique("c"), name, arguments: { amount, currency: "usd" } }]);
    expect((await call(4)).body.results[0]).toMatchObject({ status: "succeeded" });
    expect((await call(3)).body.results[0]).toMatchObject({ status: "rejected", code: "frozen" });
    const made = ((await api("GET", "/v1/freezes")).body.freezes as Array<{ id: string }>).find(
      (f) => f.id.startsWith(`tw.${id}.`),
    )!;
    const after = (await people.get("/console/freezes")).text;
    expect(row(after)).toContain(`href="#freeze-${made.id}"`);
    expect(after).toContain(`data-made-by="${id}"`);
    expect(after).toContain(`href="#tripwire-${id}"`);
    expect(after).toContain(`tripwire ${id}: the tenant, tool ${name}`);
    expect((await up.state()).requests).toHaveLength(1);
    await api("DELETE", `/v1/freezes/${made.id}`);
    await api("DELETE", `/v1/tripwires/${id}`);
  });
});

describe("console: operation controls", () => {
  it("a retrying call's page: Pause and Retry now; paused: Resume; one effect in all", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 503 });
    const op = (await turn(runId, [{ id: "c1", name, arguments: { amount: 6, currency: "usd" } }]))
      .body.results[0].operation_id as string;
    const people = await consoleAs((await testTenant()).key);
    const path = `/console/operations/${op}`;
    const retrying = (await people.get(path)).text;
    expect(retrying).toContain(">Pause<");
    expect(retrying).toContain(">Retry now<");
    expect(retrying).not.toContain(">Resume<");

    expect((await people.post(`${path}/pause`, {})).status).toBe(303);
    const paused = (await people.get(path)).text;
    expect(paused).toContain("Paused: the call is now held");
    expect(paused).toContain('data-held="pause"');
    expect(paused).toContain(">Resume<");
    expect(paused).not.toContain(">Pause<");

    await people.post(`${path}/resume`, {});
    expect((await people.get(path)).text).toContain("Resumed: the call is now retry_scheduled");
    await people.post(`${path}/retry-now`, {});
    await up.waitForEffects(1);
    expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
    // Done: no control applies, and a forged retry-now changes nothing.
    await people.get(path);
    await people.post(`${path}/retry-now`, {});
    expect((await people.get(path)).text).toContain("Nothing changed (not_waiting)");
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests).toHaveLength(2);
  });
});
