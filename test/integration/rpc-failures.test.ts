// When an object toolgate asks before a send does not answer, from the unlucky user's side: the run
// row cannot be read (so `authorize` throws, as in the 2026-12-04 audit's probe P7), or a tenant
// secret no longer decrypts (probe P6). Nothing may be stranded (every waiting operation keeps an
// alarm), nothing is sent that was not allowed, and every answer is typed: never a 500, never
// "it may be running" for a call that can no longer run.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  automaticWork,
  fireAlarm,
  manifest,
  operation,
  pastFactsBound,
  setup,
  testTenant,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

const charge = { amount: 500, currency: "usd" };

afterEach(() => {
  vi.useRealTimers();
});
const runObject = (runId: string) => (env as any).RUNS.get((env as any).RUNS.idFromName(runId));
const tenantObject = (tenantId: string) =>
  (env as any).TENANTS.get((env as any).TENANTS.idFromName(tenantId));

/** Restarts the run object: it keeps the rows it wrote in memory, so a row changed behind its back is read after a restart. */
const reload = (runId: string) =>
  runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) =>
    state.abort("reload"),
  ).catch(() => {});

/** Makes the run row undecodable (every RPC that reads it throws); returns a function that restores it. */
async function breakRun(runId: string): Promise<() => Promise<void>> {
  const saved = await runInDurableObject(
    runObject(runId),
    (_instance: unknown, state: DurableObjectState) => {
      const row = state.storage.sql.exec<{ data: string }>("SELECT data FROM run").toArray()[0]!;
      state.storage.sql.exec("UPDATE run SET data = ?", "{damaged");
      return row.data;
    },
  );
  await reload(runId);
  return async () => {
    await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) => {
      state.storage.sql.exec("UPDATE run SET data = ?", saved);
    });
    await reload(runId);
  };
}

const phaseOf = async (operationId: string) => (await operation(operationId)).body.phase as string;

describe("the run cannot be asked before a send", () => {
  it("P7: a scheduled retry whose alarm cannot ask the run stays armed; once the run answers, the next alarm sends exactly one more request", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 429 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    const operationId = first.body.results[0].operation_id as string;
    const restore = await breakRun(runId);

    // The alarm finds the run unreadable: it must not throw (the platform retries a throwing alarm
    // only a few times) and must leave its own alarm set.
    await expect(fireAlarm(operationId)).resolves.toBe(true);
    expect(await automaticWork(operationId)).toBe(true);
    expect(await phaseOf(operationId)).toBe("retry_scheduled");
    expect((await up.state()).requests).toHaveLength(1);

    // Still broken at the next alarm: still armed, still nothing sent.
    await expect(fireAlarm(operationId)).resolves.toBe(true);
    expect(await automaticWork(operationId)).toBe(true);
    expect((await up.state()).requests).toHaveLength(1);

    await restore();
    const deferred = (await trace(runId)).filter((e) => e.type === "retry_deferred");
    expect(deferred).toHaveLength(2);
    expect(deferred[0]).toMatchObject({ reason: "unavailable" });
    expect(String(deferred[0]!.detail)).toMatch(/could not be asked.*nothing was sent/);
    expect(await fireAlarm(operationId)).toBe(true);
    const done = await operation(operationId);
    expect(done.body.result).toMatchObject({ status: "succeeded" });
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(state.effects).toHaveLength(1);
    expect(state.requests[1]!.key).toBe(state.requests[0]!.key);
  });

  it("approve while the run cannot be asked: 503 unavailable, nothing decided or sent, the request still waits; approving again runs it once", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, risk: "irreversible_write", approval: "always" }),
    );
    const waiting = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = waiting.body.results[0].operation_id as string;
    expect(waiting.body.results[0].status).toBe("awaiting_approval");
    const restore = await breakRun(runId);

    const refused = await api("POST", `/v1/operations/${operationId}/approve`, {});
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe("unavailable");
    expect(refused.headers.get("Retry-After")).toBe("5");
    const view = await operation(operationId);
    expect(view.body).toMatchObject({ phase: "awaiting_approval", approval: { state: "pending" } });
    expect(await automaticWork(operationId)).toBe(true); // its expiry alarm stands
    expect((await up.state()).requests).toHaveLength(0);

    await restore();
    const approved = await api("POST", `/v1/operations/${operationId}/approve`, {});
    expect(approved.status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("resend while the run cannot be asked: 503 unavailable, nothing sent; resending again replays with the same key", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 300 }));
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({ status: "outcome_unknown" });
    const operationId = first.body.results[0].operation_id as string;
    const restore = await breakRun(runId);

    const resend = { outcome: "resend", reason: "checked the dashboard" };
    const refused = await api("POST", `/v1/operations/${operationId}/resolve`, resend);
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe("unavailable");
    expect(await phaseOf(operationId)).toBe("outcome_unknown");
    expect((await up.state()).requests).toHaveLength(1);

    await restore();
    const resent = await api("POST", `/v1/operations/${operationId}/resolve`, resend);
    expect(resent.status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(state.effects).toHaveLength(1);
  });
});

describe("a tenant secret that no longer decrypts", () => {
  /** Overwrites the stored ciphertext, as a rotated TOOLGATE_SECRETS_KEY or a damaged row leaves it. */
  const damageSecret = async (name: string) =>
    runInDurableObject(
      tenantObject((await testTenant()).tenantId),
      (_instance: unknown, state: DurableObjectState) => {
        state.storage.sql.exec(
          "UPDATE secrets SET ciphertext = ? WHERE name = ?",
          "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
          name,
        );
      },
    );
  const withSecret = async (url: string, overrides: Record<string, unknown> = {}) => {
    const secret = `PROBE_${unique("k").toUpperCase()}`;
    const value = `sk_live_${unique("value")}`;
    expect((await api("PUT", `/v1/secrets/${secret}`, { value })).status).toBe(201);
    const tool = manifest({
      url,
      request: {
        method: "POST",
        url: `${url}/charges`,
        headers: { Authorization: `Bearer {secret:${secret}}` },
      },
      ...overrides,
    });
    return { secret, value, ...(await setup(tool)) };
  };

  it("P6: the call fails typed (permanent_failure naming the secret) with nothing sent; a poll says the same; verify answers 422", async () => {
    const up = upstream();
    const { secret, value, runId, name } = await withSecret(up.url);
    await damageSecret(secret);
    // The run's tenant facts hold the undamaged copy until their bound (issue 19).
    pastFactsBound();

    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(res.body.results[0].message).toContain(secret);
    expect(res.body.results[0].message).toMatch(/could not be decrypted/);
    const poll = await api("GET", `/v1/runs/${runId}/turns/${res.body.turn_id}`);
    expect(poll.status).toBe(200);
    expect(poll.body.results[0]).toEqual(res.body.results[0]);

    const verified = await api("POST", `/v1/tools/${name}/verify`, { arguments: charge });
    expect(verified.status).toBe(422);
    expect(verified.body.code).toBe("unknown_secret");
    expect(verified.body.detail).toContain(secret);

    expect((await up.state()).requests).toHaveLength(0);
    expect(JSON.stringify([res.body, poll.body, verified.body])).not.toContain(value);
  });

  it("P6: approving a call whose secret no longer decrypts answers typed: the call is recorded failed, nothing sent", async () => {
    const up = upstream();
    const { secret, value, runId, name } = await withSecret(up.url, {
      risk: "irreversible_write",
      approval: "always",
    });
    const waiting = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = waiting.body.results[0].operation_id as string;
    await damageSecret(secret);

    const approved = await api("POST", `/v1/operations/${operationId}/approve`, {});
    expect(approved.status).toBe(200);
    const settled = await operation(operationId, 5);
    expect(settled.body.result).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(settled.body.result.message).toContain(secret);
    expect((await up.state()).requests).toHaveLength(0);
    expect(JSON.stringify([approved.body, settled.body])).not.toContain(value);
  });
});
