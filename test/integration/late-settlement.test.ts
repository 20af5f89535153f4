// Late settlement (issue 24) through the public API: a keyed write (or a lookup tool) whose attempts
// ran out while its outcome is unknown keeps settling by itself, resending with the SAME key on the
// late schedule (1 min, 6 min, … after the first attempt) until the upstream answers or the key's
// window ends. Alarms are the scripted clock: each fire is the next slot of the schedule.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  api,
  testTenant,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  upstream,
} from "../support/api.ts";

const charge = { amount: 900, currency: "usd" };
const NOT_APPLIED =
  /did not take effect|nothing was sent|before it took effect|did not happen|not executed/i;
const outage = (n: number) => Array.from({ length: n }, () => ({ kind: "status", status: 503 }));
const MIN = 60_000;

async function feedFor(operationId: string) {
  const res = await api("GET", "/v1/events?limit=500");
  expect(res.status).toBe(200);
  return (res.body.events as Array<Record<string, any>>).filter(
    (e) => e.operation_id === operationId,
  );
}
const listed = async (operationId: string) =>
  ((await api("GET", "/v1/unknown-outcomes")).body.operations as any[]).find(
    (o) => o.operation_id === operationId,
  );

describe("keyed write, upstream down longer than the attempts last", () => {
  it("503 for every attempt and the first late try, then it recovers: succeeded, one effect, one key, no person", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 2 }),
    );
    await up.script(...outage(3)); // 2 attempts + the late try at +1 min; the +6 min try finds it up
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // attempt 2: 503, attempts spent

    const settling = await operation(operationId);
    expect(settling.body).toMatchObject({
      phase: "outcome_unknown",
      settling: { next_try_at: expect.any(String), until: expect.any(String) },
      result: {
        status: "outcome_unknown",
        allowed_next_actions: ["wait", "check_status", "tell_user"],
      },
    });
    const message = settling.body.result.message as string;
    expect(message).toMatch(/toolgate_check_status/);
    expect(message).toMatch(/same idempotency key/);
    expect(message).not.toMatch(NOT_APPLIED);
    // The turn is settled for the model (it is told to check later), never "did not happen".
    const polled = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(polled.body.status).toBe("settled");
    expect(JSON.stringify(polled.body)).not.toMatch(NOT_APPLIED);
    // People see it as settling by itself, not as needing them.
    expect(await listed(operationId)).toMatchObject({
      settling: { until: settling.body.settling.until },
    });

    expect(await fireAlarm(operationId)).toBe(true); // +1 min: still down
    expect((await operation(operationId)).body).toMatchObject({
      phase: "outcome_unknown",
      settling: { next_try_at: expect.any(String) },
    });
    expect(await fireAlarm(operationId)).toBe(true); // +6 min: recovered

    const done = await operation(operationId);
    expect(done.body).toMatchObject({
      phase: "recorded",
      settling: null,
      result: { status: "succeeded" },
    });
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests).toHaveLength(4);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect(done.body.result.result).toMatchObject({ id: state.effects[0]!.id });

    // The schedule as planned: 1 min, then 6 min after the first attempt; window 24 h.
    const events = await trace(runId);
    const firstAt = events.find((e) => e.type === "attempt_started")!.at_ms as number;
    const planned = events.filter((e) => e.type === "settle_scheduled");
    expect(planned.map((e) => e.due_at_ms - firstAt)).toEqual([1 * MIN, 6 * MIN]);
    expect(planned[0]!.until_ms - firstAt).toBe(24 * 60 * MIN);
    expect(events.filter((e) => e.type === "resolved")).toEqual([]);
    expect(await listed(operationId)).toBeUndefined();
    // Nobody was paged: no operation.outcome_unknown event for it.
    expect((await feedFor(operationId)).map((e) => e.type)).not.toContain(
      "operation.outcome_unknown",
    );
  });

  it("commit_then_hang, then the outage: the late resend gets the stored result; one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 3 }),
    );
    // A proxy's 503 never reaches the idempotency layer: only the late resend gets the replay.
    const proxyDown = () => ({ kind: "gateway", status: 503 });
    await up.script({ kind: "commit_then_hang" }, proxyDown(), proxyDown(), proxyDown());
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // attempt 2: 503
    expect(await fireAlarm(operationId)).toBe(true); // attempt 3: 503, spent
    expect((await operation(operationId)).body.settling).not.toBeNull();
    expect(await fireAlarm(operationId)).toBe(true); // late try 1: 503
    expect(await fireAlarm(operationId)).toBe(true); // late try 2: the stored replay

    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    const done = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(done.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    void runId;
  });

  it("a person's verdict during the schedule wins and stops it: no request after it", async () => {
    const up = upstream();
    const { name, runId } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 2 }),
    );
    await up.script(...outage(2));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    expect((await operation(operationId)).body.settling).not.toBeNull();
    const requests = (await up.state()).requests.length;

    const resolved = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "failed",
      reason: "the ledger shows no charge; we will ask the customer",
    });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ phase: "recorded", settling: null });
    await fireAlarm(operationId); // whatever alarm is left (pruning) sends nothing
    expect((await up.state()).requests).toHaveLength(requests);
    expect((await operation(operationId)).body.result).toMatchObject({ status: "failed" });
  });

  it("the key's window ends without an answer: a person is needed (and paged) only then; nothing is sent after", async () => {
    const up = upstream();
    // A 90 s key: the +1 min try fits in it, the +6 min one does not.
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      max_attempts: 2,
      idempotency: { mode: "header", header: "Idempotency-Key", key_ttl_ms: 90_000 },
    });
    const { name, runId } = await setup(tool);
    await up.script(...outage(10));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // attempt 2: spent
    const settling = (await operation(operationId)).body;
    expect(Date.parse(settling.settling.until) - Date.parse(settling.created_at)).toBeLessThan(
      90_000 + 5_000,
    );
    expect(await fireAlarm(operationId)).toBe(true); // the one late try: 503; no slot left

    const final = await operation(operationId);
    expect(final.body).toMatchObject({ phase: "outcome_unknown", settling: null });
    expect(final.body.result.message).toMatch(/a person is checking/);
    expect(final.body.result.message).not.toMatch(NOT_APPLIED);
    expect(await listed(operationId)).toMatchObject({ settling: null });
    expect(await fireAlarm(operationId)).toBe(false);
    expect((await up.state()).requests).toHaveLength(3);
    const events = await trace(runId);
    expect(events.map((e) => e.type)).toContain("settle_window_ended");
    // The page goes out now, once, saying a person is needed.
    let paged: Array<Record<string, any>> = [];
    for (let i = 0; i < 200 && paged.length === 0; i++) {
      paged = (await feedFor(operationId)).filter((e) => e.type === "operation.outcome_unknown");
      if (paged.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(paged).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ needs_person: true }) }),
    ]);
    const endedAt = events.find((e) => e.type === "settle_window_ended")!.at_ms;
    expect(paged[0]!.at_ms ?? endedAt).toBeGreaterThanOrEqual(endedAt);
  });
});

describe("while it settles", () => {
  it("the resource lock stays held: a second write to the resource waits, then runs after it", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      max_attempts: 2,
      resource: "card:{currency}",
    });
    const { runId, name } = await setup(tool);
    await up.script(...outage(2));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    expect((await operation(operationId)).body.settling).not.toBeNull();

    const second = await turn(
      runId,
      [{ id: "c2", name, arguments: { ...charge, amount: 901 } }],
      0,
    );
    const secondId = second.body.results[0].operation_id as string;
    expect((await operation(secondId, 1)).body).toMatchObject({
      phase: "awaiting_lock",
      result: { status: "pending", code: "resource_locked" },
    });
    expect((await up.state()).requests).toHaveLength(2); // nothing of the second was sent

    expect(await fireAlarm(operationId)).toBe(true); // the late resend: recovered
    expect((await operation(operationId)).body.result.status).toBe("succeeded");
    expect((await operation(secondId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("the unknown-outcomes page shows it settling by itself, with the next try and the window's end", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 1 }),
    );
    await up.script(...outage(1));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    const view = (await operation(operationId)).body;
    expect(view.settling).not.toBeNull();

    const session = await consoleSession((await testTenant()).key);
    const page = await consoleFetch("/console/unknown-outcomes", session);
    expect(page.status).toBe(200);
    const card = page.text.slice(page.text.indexOf(`id="${operationId}"`));
    expect(card).toContain("Settling by itself");
    expect(card).toContain(`datetime="${view.settling.next_try_at}"`);
    expect(card).toContain(`datetime="${view.settling.until}"`);
  });
});

const ORIGIN = "http://toolgate.test";
async function consoleFetch(path: string, cookie: string, form?: Record<string, string>) {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`${ORIGIN}${path}`, {
      method: form ? "POST" : "GET",
      headers: {
        Cookie: cookie,
        ...(form ? { "Content-Type": "application/x-www-form-urlencoded" } : {}),
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
      redirect: "manual",
    }),
  );
  return {
    status: response.status,
    text: await response.text(),
    cookies: response.headers.getSetCookie(),
  };
}
/** Signs in through the console's form; returns the session cookie. */
async function consoleSession(key: string): Promise<string> {
  const form = await consoleFetch("/console/sign-in", "");
  const login = form.cookies.find((c) => c.startsWith("tg_console_login="))!.split(";")[0]!;
  const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)?.[1] ?? "";
  const signedIn = await consoleFetch("/console/sign-in", login, {
    csrf,
    next: "/console",
    api_key: key,
  });
  expect(signedIn.status).toBe(303);
  return signedIn.cookies.find((c) => c.startsWith("tg_console="))!.split(";")[0]!;
}

describe("lookup tool whose status lookups kept failing", () => {
  it("keeps looking up on the late schedule; the late lookup finds the effect: succeeded, one write", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      max_attempts: 2,
      idempotency: { mode: "none" },
      request: {
        method: "POST",
        url: `${up.url}/charges`,
        headers: { "X-Client-Reference": "{idempotency_key}" },
      },
      reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}`, settle_ms: 0 },
    });
    const { runId, name } = await setup(tool);
    const lookupDown = { kind: "status", status: 503, lookups: true };
    await up.script({ kind: "commit_then_hang" }, lookupDown, lookupDown);
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    // Lookup 1 ran with the unknown outcome; lookup 2 by alarm; both 503: lookups spent.
    await operation(operationId, 2);
    expect(await fireAlarm(operationId)).toBe(true);
    const settling = await operation(operationId, 2);
    expect(settling.body).toMatchObject({
      phase: "outcome_unknown",
      settling: { next_try_at: expect.any(String) },
    });
    expect(settling.body.result.message).toMatch(/status lookup/);
    expect(await fireAlarm(operationId)).toBe(true); // the late lookup finds it
    const done = await operation(operationId, 2);
    const state = await up.state();
    expect(done.body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    expect(state.requests.filter((r) => r.method === "POST")).toHaveLength(1);
    void runId;
  });
});

describe("idempotency.key_ttl_ms", () => {
  it("is validated, and refused where nothing would be settled late", async () => {
    const up = upstream();
    for (const idempotency of [
      { mode: "header", header: "Idempotency-Key", key_ttl_ms: 0 },
      { mode: "header", header: "Idempotency-Key", key_ttl_ms: 1.5 },
      { mode: "natural", key_ttl_ms: 31 * 24 * 60 * MIN },
      { mode: "none", key_ttl_ms: 60_000 }, // neither key nor lookup: would be ignored
    ]) {
      const tool = manifest({ url: up.url, idempotency });
      const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
      expect(put.status, JSON.stringify(idempotency)).toBe(422);
      expect(put.body.code).toBe("invalid_manifest");
    }
    const ok = manifest({ url: up.url, idempotency: { mode: "natural", key_ttl_ms: 3_600_000 } });
    expect((await api("PUT", `/v1/tools/${ok.name}`, ok)).status).toBe(201);
  });
});
