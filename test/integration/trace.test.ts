// Traces people and tools can use (issue 10), through the public HTTP API: lifecycle events with a
// hash chain that `verify` checks, the OTLP/JSON export (one operation span, one execute_tool span
// per attempt), `reported` only for results a turn response delivered, redaction everywhere a copy
// goes (trace, export, logs, console, inbox), retention pruning with 410s, and a background push to
// a collector that can be down without changing anything.
import { env, exports } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/domain/canonical-json.ts";
import { MAX_REPORTED_EVENTS } from "../../src/durable/operation/trace.ts";
import {
  api,
  fireAlarm,
  storedText,
  manifest,
  operation,
  opStub,
  setup,
  testTenant,
  trace,
  turn,
  upstream,
} from "../support/api.ts";

const charge = { amount: 500, currency: "usd" };
const upstreamBase = env as unknown as { UPSTREAM_URL: string };
const collectorState = async () =>
  (await (await fetch(`${upstreamBase.UPSTREAM_URL}/_control/state?ns=otel-collector`)).json()) as {
    requests: Array<{ path: string; headers: Record<string, string>; body: any; fault: string }>;
  };

/** Captures every console line (the Durable Objects run in this isolate) for the duration of a test. */
function captureLogs() {
  const lines: string[] = [];
  for (const level of ["log", "info", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      lines.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
    });
  return lines;
}
afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

const attr = (span: any, key: string) => {
  const value = span.attributes.find((a: any) => a.key === key)?.value;
  return value === undefined ? undefined : (Object.values(value)[0] as unknown);
};

describe("trace model and export", () => {
  it("503, 503, 200: lifecycle states, a verifiable chain, one operation span over three execute_tool spans, logs per attempt", async () => {
    const logs = captureLogs();
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 503 }, { kind: "status", status: 503 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    expect(await fireAlarm(operationId)).toBe(true);
    const done = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(done.body.results[0].status).toBe("succeeded");

    const events = (await trace(runId)).filter((e) => e.operation_id === operationId);
    expect(events.filter((e) => e.state).map((e) => e.state)).toEqual([
      "proposed",
      "validated",
      "executing",
      "retry_scheduled",
      "executing",
      "retry_scheduled",
      "executing",
      "recorded",
      "reported",
    ]);
    const finished = events.filter((e) => e.type === "attempt_finished");
    expect(finished.map((e) => [e.attempt, e.outcome, e.upstream_status])).toEqual([
      [1, "retryable", 503],
      [2, "retryable", 503],
      [3, "succeeded", 200],
    ]);
    for (const e of finished) expect(e.latency_ms).toEqual(expect.any(Number));
    expect(events.filter((e) => e.type === "retry_scheduled").map((e) => e.basis)).toEqual([
      "backoff",
      "backoff",
    ]);
    expect(events.find((e) => e.type === "reported")).toMatchObject({
      turn_id: first.body.turn_id,
      format: "native",
    });
    expect(events.find((e) => e.type === "validated")?.risk).toBe("write");
    // The chain: numbered from 1, each event names its predecessor's hash.
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    for (let i = 1; i < events.length; i++) expect(events[i]!.prev_hash).toBe(events[i - 1]!.hash);
    const verified = await api("GET", `/v1/operations/${operationId}?verify=1`);
    expect(verified.body.verification).toEqual({
      ok: true,
      events: events.length,
      head_hash: events.at(-1)!.hash,
    });

    // OTLP: one trace id for the run, the operation span, and three attempt spans under it.
    const otlp = await api("GET", `/v1/runs/${runId}/trace?format=otlp`);
    expect(otlp.status).toBe(200);
    const spans = otlp.body.resourceSpans[0].scopeSpans[0].spans as any[];
    const opSpan = spans.find(
      (s) => attr(s, "toolgate.operation.id") === operationId && !s.parentSpanId,
    );
    const attempts = spans.filter((s) => s.parentSpanId === opSpan.spanId);
    expect(opSpan.name).toBe(`toolgate.operation ${name}`);
    expect(opSpan.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(opSpan.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([opSpan.traceId]));
    expect(attr(opSpan, "toolgate.risk")).toBe("write");
    expect(attr(opSpan, "toolgate.outcome")).toBe("succeeded");
    expect(opSpan.status).toEqual({ code: 1 });
    expect(opSpan.events.map((e: any) => e.name)).toEqual(events.map((e) => e.type));
    expect(attempts.map((s) => s.name)).toEqual([1, 2, 3].map(() => `execute_tool ${name}`));
    const key = events.find((e) => e.type === "attempt_started")!.idempotency_key as string;
    expect(
      attempts.map((s) => [
        attr(s, "gen_ai.operation.name"),
        attr(s, "gen_ai.tool.name"),
        attr(s, "gen_ai.tool.call.id"),
        attr(s, "gen_ai.tool.type"),
        attr(s, "toolgate.operation.id"),
        attr(s, "toolgate.attempt"),
        attr(s, "toolgate.outcome"),
        attr(s, "http.response.status_code"),
        attr(s, "error.type"),
        attr(s, "toolgate.idempotency_key"),
        s.status.code,
      ]),
    ).toEqual(
      [
        [1, "retryable", 503, "503", 2],
        [2, "retryable", 503, "503", 2],
        [3, "succeeded", 200, undefined, 1],
      ].map(([attempt, outcome, status, error, code]) => [
        "execute_tool",
        name,
        "c1",
        "extension",
        operationId,
        attempt,
        outcome,
        status,
        error,
        // Hashed: never the key itself.
        expect.stringMatching(/^[0-9a-f]{64}$/),
        code,
      ]),
    );
    expect(attr(attempts[0], "toolgate.idempotency_key")).not.toBe(key);
    // Nor is it anywhere else in the export (the attempt_started span events included).
    expect(JSON.stringify(otlp.body)).not.toContain(key);
    // The upstream got one key, on every attempt, and it is not the operation id's hex (which the
    // model reads in every envelope): it cannot be worked out from the operation id.
    const sentKeys = (await up.state()).requests.map((r) => r.key);
    expect(sentKeys).toEqual([key, key, key]);
    expect(key).toMatch(/^tg_[0-9a-f]{32}$/);
    expect(key).not.toBe(`tg_${operationId.slice(3)}`);
    expect(key).not.toContain(operationId.slice(3, 11));
    expect(
      attempts.every(
        (s) =>
          BigInt(s.startTimeUnixNano) >= BigInt(opSpan.startTimeUnixNano) &&
          BigInt(s.endTimeUnixNano) <= BigInt(opSpan.endTimeUnixNano),
      ),
    ).toBe(true);

    // One JSON log line per attempt (and per decision), with the run, call, operation, tool.
    const lines = logs
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l))
      .filter((l) => l.operation_id === operationId);
    expect(
      lines
        .filter((l) => l.event === "toolgate.attempt_finished")
        .map((l) => [l.run_id, l.call_id, l.tool, l.attempt, l.outcome, typeof l.latency_ms]),
    ).toEqual([
      [runId, "c1", name, 1, "retryable", "number"],
      [runId, "c1", name, 2, "retryable", "number"],
      [runId, "c1", name, 3, "succeeded", "number"],
    ]);
    expect(lines.map((l) => l.event)).toEqual(
      expect.arrayContaining(["toolgate.retry_scheduled", "toolgate.recorded"]),
    );
    // A delivery is no attempt and no decision: kept in the trace, not logged (issue 19).
    expect(lines.map((l) => l.event)).not.toContain("toolgate.reported");
  });

  it("verify finds a rewritten event and says where the chain breaks", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 503 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    await fireAlarm(operationId);
    expect((await operation(operationId)).body.phase).toBe("recorded");
    expect((await api("GET", `/v1/operations/${operationId}?verify=1`)).body.verification.ok).toBe(
      true,
    );
    // Someone with storage access turns the 503 into a 200 in the stored log.
    const tampered = await runInDurableObject(
      opStub(operationId),
      (_instance: unknown, state: DurableObjectState) => {
        const row = state.storage.sql
          .exec<{ seq: number; events: string }>(
            "SELECT seq, events FROM op_log WHERE events LIKE '%\"upstream_status\":503%'",
          )
          .toArray()[0]!;
        const events = JSON.parse(row.events) as Array<Record<string, unknown>>;
        const target = events.find((e) => e.upstream_status === 503)!;
        target.upstream_status = 200;
        state.storage.sql.exec(
          "UPDATE op_log SET events = ? WHERE seq = ?",
          JSON.stringify(events),
          row.seq,
        );
        return target.seq as number;
      },
    );
    const verified = await api("GET", `/v1/operations/${operationId}?verify=1`);
    expect(verified.status).toBe(200);
    expect(verified.body.verification).toMatchObject({
      ok: false,
      broken_at: { seq: tampered, type: "attempt_finished", reason: "hash_mismatch" },
    });
    expect((await api("GET", `/v1/operations/${operationId}?verify=yes`)).status).toBe(400);
  });

  it("a result recorded after its turn was cancelled shows recorded (late) but never reported", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 5_000 }));
    await up.script({ kind: "slow", delayMs: 1_500 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = first.body.results[0].operation_id as string;
    await up.waitForRequests(1);
    expect((await api("POST", `/v1/runs/${runId}/cancel`)).body.status).toBe("cancelled");
    expect((await operation(operationId, 5)).body).toMatchObject({ phase: "recorded", late: true });
    const polled = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(polled.body.results[0].status).toBe("cancelled");
    const events = (await trace(runId)).filter((e) => e.operation_id === operationId);
    expect(events.find((e) => e.type === "recorded")).toMatchObject({
      late: true,
      state: "recorded",
    });
    expect(events.some((e) => e.type === "reported")).toBe(false);
  });
});

describe("reported, for a call re-proposed without end", () => {
  it(`is answered every time; its trace keeps the first ${MAX_REPORTED_EVENTS} deliveries, across restarts`, async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const turnIds: string[] = [];
    let operationId = "";
    for (let i = 0; i < MAX_REPORTED_EVENTS + 5; i++) {
      const res = await turn(runId, [{ id: `c${i}`, name, arguments: charge }]);
      expect(res.body.results[0].status).toBe("succeeded");
      operationId ||= res.body.results[0].operation_id;
      expect(res.body.results[0].operation_id).toBe(operationId);
      turnIds.push(res.body.turn_id);
    }
    expect((await up.state()).effects).toHaveLength(1);
    const reportedTurns = async () =>
      (await trace(runId))
        .filter((e) => e.operation_id === operationId && e.type === "reported")
        .map((e) => e.turn_id);
    expect(await reportedTurns()).toEqual(turnIds.slice(0, MAX_REPORTED_EVENTS));
    // A fresh instance reads its deliveries from the log: still capped, still answered, still one effect.
    await evictDurableObject(opStub(operationId));
    const later = await turn(runId, [{ id: "later", name, arguments: charge }]);
    expect(later.body.results[0]).toMatchObject({ status: "succeeded", operation_id: operationId });
    expect(await reportedTurns()).toEqual(turnIds.slice(0, MAX_REPORTED_EVENTS));
    expect(
      (await api("GET", `/v1/operations/${operationId}?verify=1`)).body.verification,
    ).toMatchObject({ ok: true });
    expect((await up.state()).effects).toHaveLength(1);
  }, 60_000);
});

describe("structured logs", () => {
  it("a call the gate refuses is one decision line, with no argument values", async () => {
    const logs = captureLogs();
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, [
      { id: "c1", name, arguments: { amount: -5, currency: "gbp-SECRETISH" } },
    ]);
    expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "invalid_arguments" });
    const lines = logs
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l))
      .filter((l) => l.run_id === runId);
    expect(lines).toEqual([
      expect.objectContaining({
        event: "toolgate.refused",
        call_id: "c1",
        tool: name,
        status: "rejected",
        code: "invalid_arguments",
        operation_id: res.body.results[0].operation_id,
      }),
    ]);
    expect(logs.join("\n")).not.toContain("gbp-SECRETISH");
  });
});

describe("redaction", () => {
  it("a redacted argument never appears in the trace, export, logs, console pages or inbox; the hash is of the real input", async () => {
    const logs = captureLogs();
    const hiddenCustomer = "cus_HIDDEN_7731";
    const hiddenNote = "note-HIDDEN-9152";
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          amount: { type: "integer", exclusiveMinimum: 0 },
          currency: { enum: ["usd", "eur"] },
          note: { type: "string" },
          customer_id: { type: "string" },
        },
        required: ["amount", "currency", "note", "customer_id"],
      },
      output_schema: {
        type: "object",
        additionalProperties: true,
        properties: { id: { type: "string" } },
        required: ["id"],
      },
      bind: { customer_id: "context.customer_id" },
      approval: "always",
      redact: ["/customer_id", "/note"],
      trace: { arguments: true, result: true },
    });
    const { runId, name } = await setup(tool, { customer_id: hiddenCustomer });
    const args = { amount: 700, currency: "usd", note: hiddenNote };
    const first = await turn(runId, [{ id: "c1", name, arguments: args }], 1);
    expect(first.body.results[0].status).toBe("awaiting_approval");
    const operationId = first.body.results[0].operation_id as string;

    const inbox = await api("GET", "/v1/approvals?state=pending");
    const item = inbox.body.items.find((i: any) => i.operation_id === operationId);
    expect(item.arguments).toEqual({
      amount: 700,
      currency: "usd",
      note: "[redacted]",
      customer_id: "[redacted]",
    });
    const { session } = await signIn((await testTenant()).key);
    // The person deciding sees the real values, named as hidden from traces (audit finding 5); it
    // is the one place they appear, and only while the approval is pending.
    const approvalsPage = await page("/console/approvals", session);
    expect(approvalsPage).toContain(operationId);
    expect(approvalsPage).toContain(hiddenCustomer);
    expect(approvalsPage).toContain('data-role="hidden-fields"');

    const approved = await api("POST", `/v1/operations/${operationId}/approve`, { reason: "ok" });
    expect(approved.status).toBe(200);
    const result = await operation(operationId, 5);
    expect(result.body.result.status).toBe("succeeded");
    // The model's own result is not redacted (it needs it), and the upstream got the real input.
    expect(result.body.result.result).toMatchObject({ customer_id: hiddenCustomer });
    const sent = (await up.state()).requests[0]!.body;
    expect(sent).toEqual({ ...args, customer_id: hiddenCustomer });
    expect(result.body.input_hash).toBe(await sha256Hex(canonicalJson(sent)));

    const done = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(done.body.results[0].status).toBe("succeeded");
    const events = (await trace(runId)).filter((e) => e.operation_id === operationId);
    expect(events.find((e) => e.type === "validated")?.arguments).toEqual(item.arguments);
    expect(events.find((e) => e.type === "recorded")?.result).toMatchObject({
      customer_id: "[redacted]",
      note: "[redacted]",
      amount: 700,
    });
    const otlp = await api("GET", `/v1/runs/${runId}/trace?format=otlp`);
    const opSpan = otlp.body.resourceSpans[0].scopeSpans[0].spans.find(
      (s: any) => attr(s, "toolgate.operation.id") === operationId && !s.parentSpanId,
    );
    expect(JSON.parse(attr(opSpan, "gen_ai.tool.call.arguments") as string)).toEqual(
      item.arguments,
    );
    expect(attr(opSpan, "gen_ai.tool.call.result")).toContain("[redacted]");

    const everything = [
      JSON.stringify(events),
      JSON.stringify((await api("GET", `/v1/runs/${runId}/trace`)).body),
      JSON.stringify(otlp.body),
      JSON.stringify((await api("GET", "/v1/approvals?state=decided")).body),
      JSON.stringify(inbox.body),
      await page(`/console/runs/${runId}`, session),
      await page("/console/approvals", session),
      JSON.stringify((await collectorState()).requests.map((r) => r.body)),
      ...logs,
    ];
    expect(logs.some((l) => l.includes(operationId))).toBe(true);
    for (const text of everything) {
      expect(text).not.toContain(hiddenCustomer);
      expect(text).not.toContain(hiddenNote);
    }
  });

  it("without the opt-in the trace and export carry neither arguments nor result", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0].status).toBe("succeeded");
    const events = await trace(runId);
    expect(events.some((e) => "arguments" in e || "result" in e)).toBe(false);
    const otlp = await api("GET", `/v1/runs/${runId}/trace?format=otlp`);
    expect(JSON.stringify(otlp.body)).not.toContain("gen_ai.tool.call.arguments");
    expect(JSON.stringify(otlp.body)).not.toContain("gen_ai.tool.call.result");
  });
});

describe("retention", () => {
  it("prunes settled operations only; a pruned one answers 410 and a re-proposal runs nothing", async () => {
    const up = upstream();
    const settledTool = manifest({ url: up.url });
    const { runId, name } = await setup(settledTool);
    const approvalTool = manifest({
      url: up.url,
      approval: { mode: "always", expires_in_ms: 7 * 24 * 60 * 60_000 },
    });
    const unknownTool = manifest({ url: up.url, idempotency: { mode: "none" }, timeout_ms: 300 });
    for (const tool of [approvalTool, unknownTool])
      expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    expect(
      (
        await api("PATCH", `/v1/runs/${runId}`, {
          tools: [name, approvalTool.name, unknownTool.name],
        })
      ).status,
    ).toBe(200);
    await up.script({ kind: "ok" }, { kind: "hang" });
    const settled = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const unknown = await turn(runId, [{ id: "c2", name: unknownTool.name, arguments: charge }], 3);
    const waiting = await turn(
      runId,
      [{ id: "c3", name: approvalTool.name, arguments: charge }],
      1,
    );
    const [settledOp, unknownOp, waitingOp] = [settled, unknown, waiting].map(
      (t) => t.body.results[0].operation_id as string,
    ) as [string, string, string];
    expect((await operation(settledOp)).body.phase).toBe("recorded");
    expect((await operation(unknownOp)).body.phase).toBe("outcome_unknown");
    expect((await operation(waitingOp)).body.phase).toBe("awaiting_approval");
    // A request a person rejected: settled, and its inbox entry closed.
    const rejectedTurn = await turn(
      runId,
      [{ id: "c5", name: approvalTool.name, arguments: { amount: 9, currency: "eur" } }],
      1,
    );
    const rejectedOp = rejectedTurn.body.results[0].operation_id as string;
    expect(
      (await api("POST", `/v1/operations/${rejectedOp}/reject`, { reason: "no" })).body.phase,
    ).toBe("recorded");
    const decided = async () =>
      (await api("GET", "/v1/approvals?state=decided&limit=100")).body.items.map(
        (i: any) => i.operation_id,
      );
    expect(await decided()).toContain(rejectedOp);
    const requestsBefore = (await up.state()).requests.length;

    // Two days and a minute later (the test deployment's TOOLGATE_RETENTION_MS), every alarm fires.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
    expect(await fireAlarm(settledOp)).toBe(true);
    await fireAlarm(unknownOp);
    await fireAlarm(waitingOp);
    expect(await fireAlarm(rejectedOp)).toBe(true);
    const { tenantId } = await testTenant();
    const tenants = (env as any).TENANTS;
    expect(await runDurableObjectAlarm(tenants.get(tenants.idFromName(tenantId)))).toBe(true);
    expect(await decided()).not.toContain(rejectedOp);
    expect(
      (await api("GET", "/v1/approvals?state=pending")).body.items.map((i: any) => i.operation_id),
    ).toContain(waitingOp);
    expect((await operation(rejectedOp)).status).toBe(410);

    const gone = await operation(settledOp);
    expect(gone.status).toBe(410);
    expect(gone.headers.get("Content-Type")).toBe("application/problem+json");
    expect(gone.body).toMatchObject({
      code: "operation_pruned",
      operation_id: settledOp,
      pruned_at: new Date(Date.now()).toISOString(),
    });
    expect((await operation(unknownOp)).body.phase).toBe("outcome_unknown");
    expect((await operation(waitingOp)).body.phase).toBe("awaiting_approval");

    // The model proposes the same charge again, with a new call id: same operation, nothing sent.
    const again = await turn(runId, [{ id: "c4", name, arguments: charge }]);
    expect(again.status).toBe(410);
    expect(again.body).toMatchObject({
      code: "operation_pruned",
      operation_id: settledOp,
      pruned: [{ call_id: "c4", operation_id: settledOp, pruned_at: gone.body.pruned_at }],
      results: [{ status: "rejected", code: "operation_pruned", operation_id: settledOp }],
    });
    expect((await up.state()).requests).toHaveLength(requestsBefore);
    const events = await trace(runId);
    expect(events.filter((e) => e.operation_id === settledOp).map((e) => e.type)).toEqual([
      "pruned",
    ]);
    expect((await api("POST", `/v1/operations/${settledOp}/cancel`)).status).toBe(410);
  });
});

describe("run retention", () => {
  const runObject = (runId: string) => (env as any).RUNS.get((env as any).RUNS.idFromName(runId));

  it("an expired run's turns go once all its operations are pruned; a run holding one is kept", async () => {
    const up = upstream();
    const marked = { amount: 424_242, currency: "usd" };
    const { runId: doneRun, name } = await setup(manifest({ url: up.url }));
    const settled = await turn(doneRun, [{ id: "c1", name, arguments: marked }]);
    const settledOp = settled.body.results[0].operation_id as string;
    expect(settled.body.results[0].status).toBe("succeeded");
    const unknownTool = manifest({ url: up.url, idempotency: { mode: "none" }, timeout_ms: 300 });
    const { runId: heldRun, name: unknownName } = await setup(unknownTool);
    await up.script({ kind: "hang" });
    const unknown = await turn(heldRun, [{ id: "c1", name: unknownName, arguments: charge }], 3);
    const unknownOp = unknown.body.results[0].operation_id as string;
    expect((await operation(unknownOp)).body.phase).toBe("outcome_unknown");
    expect(await storedText(runObject(doneRun))).toContain("424242");

    // Before the run has been expired for the retention period: nothing goes.
    expect(await runDurableObjectAlarm(runObject(doneRun))).toBe(true);
    expect((await api("GET", `/v1/runs/${doneRun}`)).status).toBe(200);
    // Token lifetime (24 h) + retention (2 days) + a minute later, but its operation not yet pruned: kept.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3 * 24 * 60 * 60_000 + 60_000);
    expect(await runDurableObjectAlarm(runObject(doneRun))).toBe(true);
    expect((await api("GET", `/v1/runs/${doneRun}`)).status).toBe(200);
    // Its operation pruned: the run goes too, arguments included, and says so on every route.
    expect(await fireAlarm(settledOp)).toBe(true);
    expect(await runDurableObjectAlarm(runObject(doneRun))).toBe(true);
    const gone = await api("GET", `/v1/runs/${doneRun}`);
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({
      code: "run_pruned",
      run_id: doneRun,
      pruned_at: new Date(Date.now()).toISOString(),
    });
    for (const path of [
      `/v1/runs/${doneRun}/trace`,
      `/v1/runs/${doneRun}/tools`,
      `/v1/runs/${doneRun}/turns/${settled.body.turn_id}`,
    ])
      expect((await api("GET", path)).status).toBe(410);
    const requests = (await up.state()).requests.length;
    const reposted = await api("POST", `/v1/runs/${doneRun}/turns`, {
      calls: [{ id: "c1", name, arguments: marked }],
    });
    expect(reposted.status).toBe(410);
    expect((await up.state()).requests).toHaveLength(requests);
    expect(await storedText(runObject(doneRun))).not.toContain("424242");
    expect(await storedText(runObject(doneRun))).not.toContain(settledOp);

    // The run whose operation still waits for a person: kept, and the person can still decide.
    await fireAlarm(unknownOp);
    expect(await runDurableObjectAlarm(runObject(heldRun))).toBe(true);
    expect((await api("GET", `/v1/runs/${heldRun}`)).status).toBe(200);
    const resolved = await api("POST", `/v1/operations/${unknownOp}/resolve`, {
      outcome: "failed",
      reason: "checked the shop: no charge",
    });
    expect(resolved.status).toBe(200);
    expect((await operation(unknownOp)).body.phase).toBe("recorded");
  });
});

describe("collector push", () => {
  it("pushes a recorded operation's spans with the configured headers; a collector that hangs changes nothing", async () => {
    const logs = captureLogs();
    // The collector stops answering (every push waits until its own timeout).
    await fetch(`${upstreamBase.UPSTREAM_URL}/_control/script?ns=otel-collector`, {
      method: "POST",
      body: JSON.stringify(Array.from({ length: 40 }, () => ({ kind: "hang" }))),
    });
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const startedMs = Date.now();
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const elapsedMs = Date.now() - startedMs;
    expect(first.status).toBe(200);
    expect(first.body.results[0]).toMatchObject({ status: "succeeded" });
    const operationId = first.body.results[0].operation_id as string;
    // Far below the push's 5 s timeout: nothing waited for the collector.
    expect(elapsedMs).toBeLessThan(3_000);
    const exported = await api("GET", `/v1/runs/${runId}/trace?format=otlp`);
    const traceId = exported.body.resourceSpans[0].scopeSpans[0].spans[0].traceId;
    let push: Awaited<ReturnType<typeof collectorState>>["requests"][number] | undefined;
    for (let seen = 0; !push;) {
      await fetch(
        `${upstreamBase.UPSTREAM_URL}/_control/wait?ns=otel-collector&requests=${seen + 1}`,
      );
      const state = await collectorState();
      seen = state.requests.length;
      push = state.requests.find((r) => JSON.stringify(r.body).includes(traceId));
    }
    expect(push.path).toBe("/v1/traces");
    expect(push.fault).toBe("hang");
    expect(push.headers["x-otel-token"]).toBe("otel-header-secret");
    expect(push.headers["content-type"]).toBe("application/json");
    const pushedSpans = push.body.resourceSpans[0].scopeSpans[0].spans;
    expect(pushedSpans.map((s: any) => s.spanId)).toEqual(
      exported.body.resourceSpans[0].scopeSpans[0].spans
        .filter((s: any) => attr(s, "toolgate.operation.id") === operationId)
        .map((s: any) => s.spanId),
    );
    expect((await operation(operationId)).body).toMatchObject({
      phase: "recorded",
      result: { status: "succeeded" },
    });
    // The secret header never reaches a log line.
    expect(logs.join("\n")).not.toContain("otel-header-secret");
  });
});

// ── console helpers (sign in with the tenant key, read a page) ─────────────────────────────────

const ORIGIN = "http://toolgate.test";
async function send(request: Request) {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(request);
  return { status: response.status, text: await response.text(), headers: response.headers };
}
const hidden = (html: string, field: string) =>
  new RegExp(`name="${field}" value="([^"]*)"`).exec(html)?.[1] ?? "";
const cookie = (headers: Headers, name: string) =>
  headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))!
    .split(";")[0]!;

async function signIn(key: string) {
  const form = await send(new Request(`${ORIGIN}/console/sign-in`));
  const signedIn = await send(
    new Request(`${ORIGIN}/console/sign-in`, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Cookie: cookie(form.headers, "tg_console_login"),
      },
      body: new URLSearchParams({
        csrf: hidden(form.text, "csrf"),
        next: "/console",
        api_key: key,
      }).toString(),
      redirect: "manual",
    }),
  );
  expect(signedIn.status).toBe(303);
  return { session: cookie(signedIn.headers, "tg_console") };
}

async function page(path: string, session: string) {
  const res = await send(new Request(`${ORIGIN}${path}`, { headers: { Cookie: session } }));
  expect(res.status).toBe(200);
  return res.text;
}
