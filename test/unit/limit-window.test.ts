// Limits across runs (issue 21): the rolling window's arithmetic and the reservation states, as tables.
import { describe, expect, it } from "vitest";
import {
  claimsFor,
  overLimitMessage,
  type AcrossRunsLimit,
} from "../../src/domain/limit/claims.ts";
import {
  askAgainAtMs,
  decideRelease,
  decideReserve,
  firstAskAtMs,
  forgettable,
  freesAtMs,
  parseWindow,
  usageOf,
  type Reservation,
} from "../../src/domain/limit/window.ts";
import { compileManifest } from "../../src/tools/manifest/compile.ts";

const H = 3_600_000;
const DAY = 24 * H;
/** Held, its operation recorded `recordedAfterMs` after the reservation (null: not known recorded yet). */
const held = (
  operationId: string,
  amount: number,
  atMs: number,
  recordedAfterMs: number | null = 0,
): Reservation => ({
  operationId,
  amount,
  atMs,
  state: "held",
  recordedAtMs: recordedAfterMs === null ? null : atMs + recordedAfterMs,
});
/** Held by an operation not known recorded: awaiting approval, a lock, a retry (or not yet asked). */
const unsent = (operationId: string, amount: number, atMs: number) =>
  held(operationId, amount, atMs, null);
const released = (operationId: string, amount: number, atMs: number): Reservation => ({
  ...held(operationId, amount, atMs),
  state: "released",
});
const claim = (operationId: string, amount: number, over: "refuse" | "approve" = "refuse") => ({
  operationId,
  amount,
  max: 1000,
  windowMs: DAY,
  over,
});

describe("parseWindow", () => {
  it.each([
    ["24h", DAY],
    ["90m", 90 * 60_000],
    ["7d", 7 * DAY],
    ["30s", 30_000],
    ["31d", 31 * DAY],
    ["32d", null],
    ["0h", null],
    ["1w", null],
    ["h", null],
    ["1.5h", null],
  ])("%s → %s", (text, ms) => expect(parseWindow(text)).toBe(ms));
});

describe("usageOf: held reservations until one window after their operation was recorded", () => {
  const now = 10 * DAY;
  it.each([
    ["nothing", [], 0, null],
    ["one held", [held("a", 300, now - H)], 300, now - H + DAY],
    ["released does not count", [released("a", 300, now - H)], 0, null],
    ["exactly one window old has left", [held("a", 300, now - DAY)], 0, null],
    ["one ms inside still counts", [held("a", 300, now - DAY + 1)], 300, now + 1],
    [
      "mixed",
      [held("a", 300, now - 2 * H), released("b", 500, now - H), held("c", 200, now - 3 * H)],
      500,
      now - 3 * H + DAY,
    ],
  ] as const)("%s", (_, rows, used, nextFree) => {
    const usage = usageOf(rows as readonly Reservation[], 1000, DAY, now);
    expect(usage).toEqual({
      used,
      remaining: 1000 - used,
      held: (rows as readonly Reservation[]).filter((r) => r.state === "held" && r.atMs > now - DAY)
        .length,
      waiting: 0,
      nextFreeAtMs: nextFree,
    });
  });

  // Audit N5: a held write never ages out of its window unsent.
  it.each([
    [
      "not known recorded, inside its window: counts, may leave one window after",
      [unsent("a", 300, now - H)],
      300,
      0,
      now - H + DAY,
    ],
    [
      "not known recorded, two windows old: still counts, waiting",
      [unsent("a", 300, now - 2 * DAY)],
      300,
      1,
      null,
    ],
    [
      "recorded 25 h after its reservation (approved late): counts until one window after that",
      [held("a", 300, now - 25 * H, 25 * H)],
      300,
      0,
      now + DAY,
    ],
    ["recorded one window ago: has left", [held("a", 300, now - 3 * DAY, 2 * DAY)], 0, 0, null],
    [
      "released while waiting: does not count",
      [{ ...unsent("a", 300, now - 2 * DAY), state: "released" }],
      0,
      0,
      null,
    ],
  ] as const)("%s", (_, rows, used, waiting, nextFree) =>
    expect(usageOf(rows as readonly Reservation[], 1000, DAY, now)).toEqual({
      used,
      remaining: 1000 - used,
      held: used === 0 ? 0 : 1,
      waiting,
      nextFreeAtMs: nextFree,
    }),
  );
});

describe("freesAtMs: the oldest leave one by one", () => {
  const now = 10 * DAY;
  const rows = [held("a", 400, now - 5 * H), held("b", 400, now - 3 * H), held("c", 100, now - H)];
  it.each([
    ["fits now", 100, now],
    ["after the oldest leaves", 300, now - 5 * H + DAY],
    ["after the two oldest leave", 600, now - 3 * H + DAY],
    ["only when all leave", 1000, now - H + DAY],
    ["never (more than max)", 1001, "never"],
  ])("%s", (_, amount, at) => expect(freesAtMs(rows, amount, 1000, DAY, now)).toBe(at));
  it("past a waiting reservation: only once it is done (no time can be given)", () => {
    const waiting = [unsent("w", 400, now - 2 * DAY), held("b", 400, now - 3 * H)];
    expect(freesAtMs(waiting, 200, 1000, DAY, now)).toBe(now);
    expect(freesAtMs(waiting, 500, 1000, DAY, now)).toBe(now - 3 * H + DAY);
    expect(freesAtMs(waiting, 700, 1000, DAY, now)).toBe("waiting");
  });
});

describe("decideReserve", () => {
  const now = 10 * DAY;
  it.each([
    [
      "under the limit → reserved",
      [held("a", 500, now - H)],
      claim("x", 500),
      "reserved",
      false,
      false,
    ],
    ["over, refuse → refused", [held("a", 600, now - H)], claim("x", 500), "refused", false, false],
    [
      "over, approve → reserved over",
      [held("a", 600, now - H)],
      claim("x", 500, "approve"),
      "reserved",
      false,
      true,
    ],
    [
      "held already → counted once",
      [held("x", 500, now - H), held("a", 500, now - H)],
      claim("x", 500),
      "reserved",
      true,
      false,
    ],
    [
      "released, asked again → a new reservation, checked again",
      [released("x", 500, now - H), held("a", 600, now - H)],
      claim("x", 500),
      "refused",
      false,
      false,
    ],
    [
      "outside the window does not count",
      [held("a", 1000, now - DAY)],
      claim("x", 1000),
      "reserved",
      false,
      false,
    ],
  ] as const)("%s", (_, rows, c, kind, already, over) => {
    const decision = decideReserve(rows as readonly Reservation[], c, now);
    expect(decision.kind).toBe(kind);
    if (decision.kind === "reserved") {
      expect([decision.already, decision.over]).toEqual([already, over]);
      if (!already) expect(decision.row).toEqual(unsent(c.operationId, c.amount, now));
    }
  });

  it("a repeat keeps the first reservation's time (never later in the window)", () => {
    const decision = decideReserve([held("x", 500, now - 5 * H)], claim("x", 500), now);
    expect(decision).toMatchObject({ kind: "reserved", already: true, row: { atMs: now - 5 * H } });
  });

  it("refused: what remains and when the window frees it", () => {
    const decision = decideReserve([held("a", 800, now - 2 * H)], claim("x", 300), now);
    expect(decision).toEqual({
      kind: "refused",
      usage: { used: 800, remaining: 200, held: 1, waiting: 0, nextFreeAtMs: now - 2 * H + DAY },
      frees: now - 2 * H + DAY,
    });
  });

  it("audit N5: three emails held for approval past their 1 h window still count at 61 min", () => {
    const t0 = 10 * DAY;
    const emails = { max: 3, windowMs: H, over: "refuse" as const, amount: 1 };
    const rows = ["e1", "e2", "e3"].map((id) => unsent(id, 1, t0));
    const decision = decideReserve(rows, { ...emails, operationId: "e4" }, t0 + 61 * 60_000);
    expect(decision).toMatchObject({
      kind: "refused",
      usage: { used: 3, waiting: 3, nextFreeAtMs: null },
      frees: "waiting",
    });
    // Sent and recorded at 62 min: they count until 122 min.
    const sent = ["e1", "e2", "e3"].map((id) => held(id, 1, t0, 62 * 60_000));
    expect(decideReserve(sent, { ...emails, operationId: "e4" }, t0 + 121 * 60_000)).toMatchObject({
      kind: "refused",
      frees: t0 + 122 * 60_000,
    });
    expect(decideReserve(sent, { ...emails, operationId: "e4" }, t0 + 122 * 60_000)).toMatchObject({
      kind: "reserved",
      over: false,
    });
  });
});

describe("forgettable: never a row a window the limit has had can still count (audit N4)", () => {
  const now = 10 * DAY;
  it.each([
    [
      "recorded 2 h ago, longest window 24 h (a 1 h tool asked last): kept",
      held("a", 1000, now - 2 * H),
      DAY,
      false,
    ],
    ["recorded one longest window ago: forgotten", held("a", 1000, now - DAY), DAY, true],
    ["held, not known recorded, a month old: kept", unsent("a", 1, now - 30 * DAY), H, false],
    ["released one longest window ago: forgotten", released("a", 5, now - DAY), DAY, true],
    ["released inside the longest window: kept", released("a", 5, now - H), DAY, false],
  ] as const)("%s", (_, row, longest, expected) =>
    expect(forgettable(row, longest, now)).toBe(expected),
  );
});

describe("the sweep's schedule", () => {
  it.each([
    ["a day's window: two minutes after the reservation", DAY, 120_000],
    ["a 30 s window: one window after", 30_000, 30_000],
    ["a 1 s window: no sooner than 10 s", 1_000, 10_000],
  ])("first ask, %s", (_, windowMs, after) => expect(firstAskAtMs(5, windowMs)).toBe(5 + after));
  it("not recorded yet: asked again one window later (learning within a window loses nothing)", () => {
    expect(askAgainAtMs(5, H)).toBe(5 + H);
    expect(askAgainAtMs(5, 1_000)).toBe(5 + 10_000);
  });
});

describe("decideRelease", () => {
  it.each([
    ["held → released", [held("x", 5, 1)], "x", released("x", 5, 1)],
    ["released again → nothing", [released("x", 5, 1)], "x", null],
    ["never held → nothing", [held("y", 5, 1)], "x", null],
  ] as const)("%s", (_, rows, id, expected) =>
    expect(decideRelease(rows as readonly Reservation[], id)).toEqual(expected),
  );
});

describe("claimsFor", () => {
  const limit = (over: Partial<AcrossRunsLimit>): AcrossRunsLimit => ({
    name: "refunds_per_customer_day",
    subject: "context.customer_id",
    window: "24h",
    windowMs: DAY,
    measure: { kind: "sum", field: "amount" },
    max: 1000,
    over: "refuse",
    ...over,
  });
  it.each([
    [
      "sum of a context subject",
      limit({}),
      { amount: 250 },
      { customer_id: "cus_1" },
      "context.customer_id:cus_1",
      250,
    ],
    [
      "count per user",
      limit({ subject: "user", measure: { kind: "count" } }),
      {},
      {},
      "user:u1",
      1,
    ],
    ["tenant", limit({ subject: "tenant" }), { amount: 5 }, {}, "tenant", 5],
    [
      "numeric context value",
      limit({}),
      { amount: 5 },
      { customer_id: 42 },
      "context.customer_id:42",
      5,
    ],
  ] as const)("%s", (_, l, input, context, subject, amount) => {
    const claims = claimsFor([l], input, context, "u1");
    expect(claims).toMatchObject({
      ok: true,
      value: [{ subject, amount, max: 1000, windowMs: DAY }],
    });
  });
  it.each([
    ["subject missing from the context", limit({}), { amount: 5 }, {}],
    ["subject not a string or number", limit({}), { amount: 5 }, { customer_id: { a: 1 } }],
    ["summed field absent", limit({}), {}, { customer_id: "c" }],
    ["summed field negative", limit({}), { amount: -5 }, { customer_id: "c" }],
  ] as const)("fails closed: %s", (_, l, input, context) => {
    const claims = claimsFor([l], input, context, "u1");
    expect(claims).toMatchObject({ ok: false, error: { code: "policy_denied" } });
  });
  it("the model is told what remains and when it frees", () => {
    const text = overLimitMessage(
      {
        name: "refunds_per_customer_day",
        subject: "context.customer_id:cus_1",
        amount: 300,
        max: 1000,
        windowMs: DAY,
        over: "refuse",
      },
      { used: 800, remaining: 200, held: 2, waiting: 0, nextFreeAtMs: 0 },
      "2026-12-05T09:00:00.000Z",
    );
    expect(text).toContain("200 remains");
    expect(text).toContain("1000 per 1 day for customer_id cus_1");
    expect(text).toContain("frees at 2026-12-05T09:00:00.000Z at the earliest");
  });
  it("only calls still waiting can free it: no time is given, and the model is told why", () => {
    const text = overLimitMessage(
      { name: "emails", subject: "user:u1", amount: 1, max: 3, windowMs: H, over: "refuse" },
      { used: 3, remaining: 0, held: 3, waiting: 2, nextFreeAtMs: null },
      "waiting",
    );
    expect(text).toContain("3 per 1 hour for user u1");
    expect(text).toContain("2 of the calls counted have not finished yet");
    expect(text).toContain("each counts until it finishes and for 1 hour after");
    expect(text).not.toContain("frees at");
  });
});

describe("manifest limits_across_runs: refused at PUT, never ignored", () => {
  const base = {
    name: "refund",
    description: "Refund.",
    input_schema: {
      type: "object",
      properties: { amount: { type: "number" }, note: { type: "string" } },
      required: ["amount"],
    },
    risk: "write",
    request: { method: "POST", url: "http://127.0.0.1:1/refunds" },
  };
  const hosts = { allowlist: [], allowLoopback: true };
  const compile = (limit: Record<string, unknown>) =>
    compileManifest(
      {
        ...base,
        limits_across_runs: [{ name: "l", subject: "user", window: "24h", max: 10, ...limit }],
      },
      hosts,
    );
  it.each([
    ["sum of an undeclared field", { sum: "amout" }, /not a number or integer property/],
    ["sum of a string field", { sum: "note" }, /not a number or integer property/],
    ["both sum and count", { sum: "amount", count: true }, /exactly one/],
    ["neither", {}, /exactly one/],
    ["an unknown field", { sum: "amount", per: "day" }, /per/],
    ["a bad subject", { sum: "amount", subject: "input.amount" }, /subject/],
    ["a window too long", { sum: "amount", window: "40d" }, /between 1s and 31d/],
    ["a fractional count max", { count: true, max: 2.5 }, /whole number/],
  ])("%s", (_, limit, detail) => {
    const compiled = compile(limit);
    expect(compiled.ok).toBe(false);
    if (!compiled.ok) {
      expect(compiled.error.code).toBe("invalid_manifest");
      expect(compiled.error.detail).toMatch(detail);
    }
  });
  it("a valid one compiles to the spec", () => {
    const compiled = compile({ sum: "amount", over: "approve" });
    expect(compiled.ok && compiled.value.limitsAcrossRuns).toEqual([
      {
        name: "l",
        subject: "user",
        window: "24h",
        windowMs: DAY,
        measure: { kind: "sum", field: "amount" },
        max: 10,
        over: "approve",
      },
    ]);
  });
});
