// Tenant-plane events (issue 18): each reportable operation transition writes its event in the
// transition's own transaction; after the commit it goes to the EVENTS queue, whose consumer stores
// it at the tenant, and GET /v1/events reads it. A send that fails (standing in for a crash between
// the commit and the send) is made good by the operation's alarm, with the same event id.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  newTenant,
  operation,
  opOutboxCount,
  opStub,
  setup,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

type Event = {
  id: string;
  type: string;
  tenant_id: string;
  run_id: string | null;
  operation_id: string | null;
  tool: string | null;
  data: Record<string, any>;
};
const charge = { amount: 700, currency: "usd" };

async function feed(auth?: string): Promise<Event[]> {
  const events: Event[] = [];
  let since: string | null = null;
  for (;;) {
    const q: string = since ? `?limit=500&since=${since}` : "?limit=500";
    const res = await api("GET", `/v1/events${q}`, undefined, auth ? { Authorization: auth } : {});
    expect(res.status).toBe(200);
    events.push(...res.body.events);
    since = res.body.next_cursor;
    if (!res.body.has_more) return events;
  }
}

/** Polls the feed (bounded: the consumer runs in the pool) until `done` holds; the last feed read. */
async function feedUntil(done: (events: Event[]) => boolean, auth?: string): Promise<Event[]> {
  let events: Event[] = [];
  for (let i = 0; i < 200; i++) {
    events = await feed(auth);
    if (done(events)) return events;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return events;
}

const ofOp = (events: Event[], operationId: string) =>
  events.filter((e) => e.operation_id === operationId);

/**
 * The events the operation has not handed to the queue yet: riding in their log rows
 * (`unsent_events`) or, after a failed send, in the outbox.
 */
const unsentEvents = (operationId: string) =>
  runInDurableObject(opStub(operationId), (_instance: unknown, state: DurableObjectState) => {
    const sql = state.storage.sql;
    const has = (table: string) =>
      sql.exec("SELECT 1 FROM sqlite_schema WHERE name = ?", table).toArray().length > 0;
    const inLog = sql
      .exec<{ columns: number }>(
        "SELECT COUNT(*) AS columns FROM pragma_table_info('op_log') WHERE name = 'unsent_events'",
      )
      .one().columns
      ? sql
          .exec<{ seq: number; unsent_events: string }>(
            "SELECT seq, unsent_events FROM op_log WHERE unsent_events IS NOT NULL",
          )
          .toArray()
          .flatMap((row) =>
            (JSON.parse(row.unsent_events) as Event[]).map((event) => ({ seq: row.seq, event })),
          )
      : [];
    const inOutbox = has("op_outbox")
      ? sql
          .exec<{ seq: number; payload: string }>(
            "SELECT seq, payload FROM op_outbox WHERE kind LIKE 'event:%' ORDER BY seq, kind",
          )
          .toArray()
          .map((row) => ({ seq: row.seq, event: JSON.parse(row.payload) as Event }))
      : [];
    return [...inOutbox, ...inLog].sort((a, b) => a.seq - b.seq).map(({ event }) => event);
  });

describe("events out", () => {
  it("an approval request → exactly one approval.requested, redacted fields absent, no secret anywhere in the feed", async () => {
    const up = upstream();
    const secretName = unique("KEY").toUpperCase();
    const secretValue = `sk_live_${unique("s")}`;
    expect((await api("PUT", `/v1/secrets/${secretName}`, { value: secretValue })).status).toBe(
      201,
    );
    const hiddenNote = `note-${unique("n")}`;
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          amount: { type: "integer", exclusiveMinimum: 0 },
          currency: { enum: ["usd", "eur"] },
          note: { type: "string" },
        },
        required: ["amount", "currency"],
      },
      request: {
        method: "POST",
        url: `${up.url}/charges`,
        headers: { Authorization: `Bearer {secret:${secretName}}` },
      },
      risk: "irreversible_write",
      approval: "always",
      redact: ["/note"],
    });
    const { runId, name } = await setup(tool);
    const res = await turn(
      runId,
      [{ id: "c1", name, arguments: { ...charge, note: hiddenNote } }],
      0,
    );
    expect(res.body.results[0].status).toBe("awaiting_approval");
    const operationId = res.body.results[0].operation_id as string;

    const events = await feedUntil((all) => ofOp(all, operationId).length >= 1);
    const mine = ofOp(events, operationId);
    expect(mine.map((e) => e.type)).toEqual(["approval.requested"]);
    expect(mine[0]).toMatchObject({
      id: expect.stringMatching(/^evt_[0-9a-f]{32}$/),
      run_id: runId,
      tool: name,
      data: { state: "pending", arguments: { amount: 700, currency: "usd" } },
    });
    expect(mine[0]!.data.arguments).not.toHaveProperty("note");
    expect(JSON.stringify(events)).not.toContain(hiddenNote);

    // Approved and executed (the secret goes upstream): decided and recorded, still no secret.
    expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).requests[0]!.authorization).toBe(`Bearer ${secretValue}`);
    const after = await feedUntil((all) => ofOp(all, operationId).length >= 3);
    expect(ofOp(after, operationId).map((e) => e.type)).toEqual([
      "approval.requested",
      "approval.decided",
      "operation.recorded",
    ]);
    expect(JSON.stringify(after)).not.toContain(secretValue);
    expect(JSON.stringify(after)).not.toContain(hiddenNote);
  });

  it("a charge that succeeds → one operation.recorded with its status; filtered by type", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.body.results[0].status).toBe("succeeded");
    const operationId = res.body.results[0].operation_id as string;
    const events = await feedUntil((all) => ofOp(all, operationId).length >= 1);
    expect(ofOp(events, operationId)).toEqual([
      expect.objectContaining({
        type: "operation.recorded",
        run_id: runId,
        tool: name,
        data: expect.objectContaining({
          status: "succeeded",
          code: null,
          took_effect: true,
          arguments: charge,
        }),
      }),
    ]);
    const typed = await api("GET", "/v1/events?type=operation.recorded&limit=500");
    expect(typed.body.events.every((e: Event) => e.type === "operation.recorded")).toBe(true);
    expect(ofOp(typed.body.events, operationId)).toHaveLength(1);
  });

  it("operation.recorded says whether it took effect: failed/invalid_output did (the tool answered success), a 400 did not", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "invalid_json" }, { kind: "status", status: 400 });
    const unreadable = await turn(runId, [{ id: "u1", name, arguments: charge }]);
    expect(unreadable.body.results[0]).toMatchObject({ status: "failed", code: "invalid_output" });
    const refused = await turn(runId, [{ id: "u2", name, arguments: { ...charge, amount: 701 } }]);
    expect(refused.body.results[0]).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
    const ids = [unreadable, refused].map((r) => r.body.results[0].operation_id as string);
    const events = await feedUntil((all) => ids.every((id) => ofOp(all, id).length >= 1));
    expect(ids.map((id) => ofOp(events, id)[0]!.data)).toEqual([
      expect.objectContaining({ status: "failed", code: "invalid_output", took_effect: true }),
      expect.objectContaining({
        status: "rejected",
        code: "invalid_arguments",
        took_effect: false,
      }),
    ]);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a run's turns: turn.settled once per turn (a poll again adds none); run.budget_exhausted once, the first time a budget refuses", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const created = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
      budgets: { max_tool_calls: 1 },
    });
    const runId = created.body.run_id as string;
    const name = tool.name;
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0].status).toBe("succeeded");
    const turnId = first.body.turn_id as string;
    // Polled again: still one turn.settled.
    expect((await api("GET", `/v1/runs/${runId}/turns/${turnId}`)).status).toBe(200);
    const second = await turn(runId, [
      { id: "c2", name, arguments: { amount: 5, currency: "usd" } },
    ]);
    expect(second.body.results[0]).toMatchObject({
      status: "budget_exhausted",
      code: "max_tool_calls",
    });
    const third = await turn(runId, [
      { id: "c3", name, arguments: { amount: 6, currency: "usd" } },
    ]);
    expect(third.body.results[0].status).toBe("budget_exhausted");
    const ofRun = (all: Event[]) => all.filter((e) => e.run_id === runId);
    const events = await feedUntil(
      (all) =>
        ofRun(all).filter((e) => e.type === "turn.settled").length >= 3 &&
        ofRun(all).some((e) => e.type === "run.budget_exhausted"),
    );
    const settled = ofRun(events).filter((e) => e.type === "turn.settled");
    expect(settled.map((e) => e.data.turn_id)).toEqual([
      turnId,
      second.body.turn_id,
      third.body.turn_id,
    ]);
    expect(settled[0]!.data.results).toEqual([
      expect.objectContaining({
        call_id: "c1",
        status: "succeeded",
        operation_id: first.body.results[0].operation_id,
      }),
    ]);
    // No result body in the event: a status summary only.
    expect(JSON.stringify(settled[0])).not.toContain('"result"');
    const exhausted = ofRun(events).filter((e) => e.type === "run.budget_exhausted");
    expect(exhausted).toEqual([
      expect.objectContaining({
        tool: name,
        data: expect.objectContaining({ call_id: "c2", code: "max_tool_calls" }),
      }),
    ]);
    expect(ofRun(events).filter((e) => e.type === "operation.recorded")).toHaveLength(1);
  });

  it("a write whose outcome is unknown → one operation.outcome_unknown that says a person is needed; resolved → operation.recorded", async () => {
    const up = upstream();
    const { name, runId } = await setup(
      manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } }),
    );
    await up.script({ kind: "commit_then_hang" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.body.results[0]).toMatchObject({ status: "outcome_unknown" });
    const operationId = res.body.results[0].operation_id as string;
    const resolved = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "succeeded",
      reason: "checked the ledger",
    });
    expect(resolved.status).toBe(200);
    const events = await feedUntil((all) => ofOp(all, operationId).length >= 2);
    expect(ofOp(events, operationId)).toEqual([
      expect.objectContaining({
        type: "operation.outcome_unknown",
        data: expect.objectContaining({ code: "timeout_unknown", needs_person: true }),
      }),
      expect.objectContaining({
        type: "operation.recorded",
        data: expect.objectContaining({ status: "succeeded", via: "resolve" }),
      }),
    ]);
  });

  it("a send that fails after the commit is made good by the alarm after a restart, with the same event ids", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
    const { runId, name } = await setup(tool);
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = res.body.results[0].operation_id as string;
    await feedUntil((all) => ofOp(all, operationId).length >= 1);
    // The queue is down for this instance (its outbox's view of the binding): the commit succeeds,
    // the send after it fails, as if the object had died between the two.
    const stub: DurableObjectStub = opStub(operationId);
    await runInDurableObject(stub, (instance: unknown) => {
      const shell = (instance as { shell: { env: object } }).shell;
      shell.env = {
        ...shell.env,
        EVENTS: { sendBatch: () => Promise.reject(new Error("queue unavailable")) },
      };
    });
    expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
    const unsent = await unsentEvents(operationId);
    expect(unsent.map((e) => e.type)).toEqual(["approval.decided", "operation.recorded"]);
    expect(ofOp(await feed(), operationId).map((e) => e.type)).toEqual(["approval.requested"]);

    // Restart (memory gone, storage kept): the alarm sends what the outbox still holds.
    await runInDurableObject(stub, (_instance: unknown, state: DurableObjectState) =>
      state.abort("restart"),
    ).catch(() => {});
    expect(await fireAlarm(operationId)).toBe(true);
    expect(await unsentEvents(operationId)).toEqual([]);
    const events = await feedUntil((all) => ofOp(all, operationId).length >= 3);
    const mine = ofOp(events, operationId);
    expect(mine.map((e) => e.type)).toEqual([
      "approval.requested",
      "approval.decided",
      "operation.recorded",
    ]);
    // The ids written in the transaction are the ids delivered.
    expect(mine.slice(1).map((e) => e.id)).toEqual(unsent.map((e) => e.id));
    // Still exactly one effect: the alarm only sent the events.
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("an object that dies between the commit and the send (events still in their log row) sends them from the alarm after a restart, same ids, no second effect", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
    const { runId, name } = await setup(tool);
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const pendingId = res.body.results[0].operation_id as string;
    await feedUntil((all) => ofOp(all, pendingId).length >= 1);
    const pending = opStub(pendingId);
    // The queue never answers this instance: the send is under way when the object dies.
    await runInDurableObject(pending, (instance: unknown) => {
      const shell = (instance as { shell: { env: object } }).shell;
      shell.env = { ...shell.env, EVENTS: { sendBatch: () => new Promise(() => {}) } };
    });
    expect((await api("POST", `/v1/operations/${pendingId}/approve`, {})).status).toBe(200);
    expect((await operation(pendingId, 5)).body.result.status).toBe("succeeded");
    const unsent = await unsentEvents(pendingId);
    expect(unsent.map((e) => e.type)).toEqual(["approval.decided", "operation.recorded"]);
    // No event went to the outbox (it holds only the approvals inbox rows): they are still in the
    // log rows whose transactions wrote them.
    const outboxed = await runInDurableObject(
      pending,
      (_instance: unknown, state: DurableObjectState) =>
        opOutboxCount(state.storage.sql, "kind LIKE 'event:%'"),
    );
    expect(outboxed).toBe(0);
    await runInDurableObject(pending, (_instance: unknown, state: DurableObjectState) =>
      state.abort("crash"),
    ).catch(() => {});
    expect(await fireAlarm(pendingId)).toBe(true);
    expect(await unsentEvents(pendingId)).toEqual([]);
    const events = await feedUntil((all) => ofOp(all, pendingId).length >= 3);
    const mine = ofOp(events, pendingId);
    expect(mine.map((e) => e.type)).toEqual([
      "approval.requested",
      "approval.decided",
      "operation.recorded",
    ]);
    expect(mine.slice(1).map((e) => e.id)).toEqual(unsent.map((e) => e.id));
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a submit that changes nothing (an idempotency conflict) produces no event", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { order_id: { type: "string" }, amount: { type: "number" } },
        required: ["order_id", "amount"],
      },
      request: { method: "POST", url: `${up.url}/orders/{order_id}/refunds` },
      operation_key: ["order_id"],
    });
    const { runId, name } = await setup(tool);
    const a = await turn(runId, [{ id: "c1", name, arguments: { order_id: "o1", amount: 20 } }]);
    const operationId = a.body.results[0].operation_id as string;
    const b = await turn(runId, [{ id: "c2", name, arguments: { order_id: "o1", amount: 25 } }]);
    expect(b.body.results[0]).toMatchObject({ status: "rejected", code: "idempotency_conflict" });
    expect(await unsentEvents(operationId)).toEqual([]);
    // A later event of this test's run proves the consumer caught up past both turns.
    const c = await turn(runId, [{ id: "c3", name, arguments: { order_id: "o2", amount: 5 } }]);
    const later = c.body.results[0].operation_id as string;
    const events = await feedUntil((all) => ofOp(all, later).length >= 1);
    expect(ofOp(events, operationId).map((e) => e.type)).toEqual(["operation.recorded"]);
    expect(ofOp(events, operationId)[0]!.data.arguments).toEqual({ order_id: "o1", amount: 20 });
  });

  it("tenant B never sees tenant A's events; the feed needs events:read and checks its query", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = res.body.results[0].operation_id as string;
    await feedUntil((all) => ofOp(all, operationId).length >= 1);
    const b = await newTenant(ALL_SCOPES);
    const bFeed = await feed(`Bearer ${b.key}`);
    expect(ofOp(bFeed, operationId)).toEqual([]);
    expect(bFeed.every((e) => e.tenant_id === b.tenantId)).toBe(true);
    // A's event id as B's cursor: unknown at B, not a window into A.
    const aId = ofOp(await feed(), operationId)[0]!.id;
    const cross = await api("GET", `/v1/events?since=${aId}`, undefined, {
      Authorization: `Bearer ${b.key}`,
    });
    expect(cross.status).toBe(400);
    const noScope = await newTenant(["runs:read"]);
    const denied = await api("GET", "/v1/events", undefined, {
      Authorization: `Bearer ${noScope.key}`,
    });
    expect(denied.status).toBe(403);
    expect((await api("GET", "/v1/events?bogus=1")).status).toBe(400);
    expect((await api("GET", "/v1/events?type=nope")).status).toBe(400);
    expect((await api("GET", "/v1/events?type=webhook.test")).status).toBe(400); // never stored
    // An ISO time is a start point too.
    const since = new Date(Date.now() - 60_000).toISOString();
    const timed = await api("GET", `/v1/events?since=${encodeURIComponent(since)}&limit=500`);
    expect(ofOp(timed.body.events, operationId)).toHaveLength(1);
  });
});

void env;
