// Data residency (issue 19 item 3): the jurisdiction every id and object name carries, and the one
// placement function in production (a namespace whose `jurisdiction()` works, as Cloudflare's does)
// and in development (workerd's, which throws "not implemented").
import { describe, expect, it } from "vitest";
import { jurisdictionOf, OPERATION_ID, RUN_ID, TENANT_ID } from "../../src/domain/jurisdiction.ts";
import { freezeCall } from "../../src/domain/identity.ts";
import { budgetKey } from "../../src/domain/retry-budget.ts";
import type { Env } from "../../src/durable/env.ts";
import { observePlacements, placedStub, type Placement } from "../../src/durable/placement.ts";

const EU_TENANT = "ten_eu_01JZ0000000000000000000000";
const TENANT = "ten_01JZ0000000000000000000000";

describe("jurisdictionOf", () => {
  it.each([
    [EU_TENANT, "eu"],
    ["ten_fedramp_01JZ0000000000000000000000", "fedramp"],
    ["run_eu_01JZ0000000000000000000000", "eu"],
    [`op_eu_${"a".repeat(32)}`, "eu"],
    // Per-tenant objects are named after their tenant: locks, retry budgets, any added later.
    [`${EU_TENANT}:order:o1`, "eu"],
    [budgetKey(EU_TENANT, "https://api.example.test/charges"), "eu"],
    // Untagged ids (tenants without a jurisdiction, and every id made before) stay where they were.
    [TENANT, null],
    ["run_01JZ0000000000000000000000", null],
    [`op_${"e".repeat(32)}`, null],
    [`${TENANT}:order:o1`, null],
    // A resource or origin that merely contains a tag does not move a default tenant's object.
    [`${TENANT}:order:run_eu_x`, null],
    ["ten_mars_01JZ0000000000000000000000", null],
    ["key_eu_01JZ0000000000000000000000", null],
  ])("%s → %s", (name, expected) => {
    expect(jurisdictionOf(name)).toBe(expected);
  });

  it("the edge accepts tagged and untagged ids, and no other tag", () => {
    expect(TENANT_ID.test(EU_TENANT) && TENANT_ID.test(TENANT)).toBe(true);
    expect(TENANT_ID.test("ten_us_01JZ0000000000000000000000")).toBe(false);
    expect(RUN_ID.test("run_fedramp_01JZ0000000000000000000000")).toBe(true);
    expect(OPERATION_ID.test(`op_eu_${"0".repeat(32)}`)).toBe(true);
    expect(OPERATION_ID.test(`op_xx_${"0".repeat(32)}`)).toBe(false);
  });

  it("an operation id carries its tenant's jurisdiction; a default tenant's ids are unchanged", async () => {
    const call = {
      runId: "run_x",
      tool: "charge",
      risk: "write" as const,
      scope: "tenant" as const,
      operationKey: [],
      input: { amount: 1 },
      callId: "c1",
    };
    const eu = await freezeCall({ ...call, tenantId: EU_TENANT });
    const plain = await freezeCall({ ...call, tenantId: TENANT });
    expect(eu.operationId).toMatch(/^op_eu_[0-9a-f]{32}$/);
    expect(plain.operationId).toMatch(/^op_[0-9a-f]{32}$/);
  });
});

/** A namespace that names its ids by (jurisdiction, name), like Cloudflare's. */
function fakeNamespace(jurisdictions: "supported" | "not implemented") {
  const made: string[] = [];
  const space = (jurisdiction: string | null) => ({
    idFromName: (name: string) => ({ toString: () => `${jurisdiction ?? "-"}/${name}` }),
    get: (id: { toString(): string }) => {
      made.push(id.toString());
      return { id };
    },
    jurisdiction: (j: string) => {
      if (jurisdictions === "not implemented")
        throw new Error("Jurisdiction restrictions are not implemented in workerd.");
      return space(j);
    },
  });
  return { namespace: space(null), made };
}
const envWith = (namespace: unknown, mode: string) =>
  ({ RUNS: namespace, TOOLGATE_ENV: mode }) as unknown as Env;

describe("placedStub", () => {
  it("production: a tagged name is made through namespace.jurisdiction(j), an untagged one through the namespace", () => {
    const { namespace, made } = fakeNamespace("supported");
    const seen: Placement[] = [];
    const stop = observePlacements((p) => seen.push(p));
    placedStub(envWith(namespace, "production"), "RUNS", "run_eu_01JZ0000000000000000000000");
    placedStub(envWith(namespace, "production"), "RUNS", "run_01JZ0000000000000000000000");
    stop();
    expect(made).toEqual([
      "eu/run_eu_01JZ0000000000000000000000",
      "-/run_01JZ0000000000000000000000",
    ]);
    expect(seen.map((p) => [p.via, p.jurisdiction])).toEqual([
      ["jurisdiction", "eu"],
      ["default", null],
    ]);
  });

  it("production without jurisdiction support: the error stands, nothing is placed elsewhere", () => {
    const { namespace, made } = fakeNamespace("not implemented");
    expect(() =>
      placedStub(envWith(namespace, "production"), "RUNS", "run_eu_01JZ0000000000000000000000"),
    ).toThrow(/not implemented/);
    expect(made).toEqual([]);
  });

  it("development on workerd: a separate name space of the plain namespace, never the default object of that name", () => {
    const { namespace, made } = fakeNamespace("not implemented");
    placedStub(envWith(namespace, "development"), "RUNS", "run_eu_01JZ0000000000000000000000");
    expect(made).toEqual(["-/jurisdiction:eu:run_eu_01JZ0000000000000000000000"]);
  });
});
