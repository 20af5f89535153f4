// Bad setups are refused, not stored (issue 31 item 6), as a newcomer would make them: a `bind` or
// `limits` field the input schema does not declare and a limit threshold that is not
// `context.<field>` are 422 at PUT with the stored version untouched; a context field a tool needs
// and a run lacks is a warning at PUT, at run creation and at PATCH, and every call that needs it is
// refused naming it, with nothing sent and nothing counted; an unknown webhook event type is named
// with the valid ones.
import { describe, expect, it } from "vitest";
import { api, manifest, turn, unique, upstream } from "../support/api.ts";

const SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: { amount: { type: "integer", minimum: 1 }, customer_id: { type: "string" } },
  required: ["amount", "customer_id"],
};

/** A refund tool with customer_id bound from the run and a per-customer limit across runs. */
function refundTool(url: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const limit = unique("refunds_per_customer");
  return manifest({
    url,
    description: "Refund the customer.",
    input_schema: SCHEMA,
    output_schema: { type: "object" },
    request: { method: "POST", url: `${url}/refunds` },
    bind: { customer_id: "context.customer_id" },
    limits_across_runs: [
      { name: limit, subject: "context.customer_id", window: "24h", sum: "amount", max: 1000 },
    ],
    ...extra,
  });
}

async function put(tool: Record<string, unknown>) {
  return api("PUT", `/v1/tools/${tool.name as string}`, tool);
}
async function newRun(tools: string[], context: Record<string, unknown>) {
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools, context });
  expect(run.status).toBe(201);
  return run;
}
const contextWarnings = (body: { warnings: Array<{ code: string }> }) =>
  body.warnings.filter((w) => w.code === "context_missing");

describe("a manifest that cannot work as written is refused at PUT, and the stored version stays", () => {
  it.each([
    [
      "a bind to a field the closed schema does not declare",
      { bind: { cust: "context.customer_id" } },
      /bind\.cust: "cust" is not a property of input_schema/,
    ],
    [
      "a bind to an undeclared field of a schema that allows more keys (the model would fill customer_id)",
      {
        input_schema: { ...SCHEMA, additionalProperties: true },
        bind: { cust: "context.customer_id" },
      },
      /bind\.cust: "cust" is not a property of input_schema/,
    ],
    [
      "a bind from something other than context.<field>",
      { bind: { customer_id: "user.id" } },
      /bind values look like context\.<field>[\s\S]*bind\.customer_id/,
    ],
    [
      "a limit on a field the schema does not declare",
      { limits: { amonut: { max: 100 } } },
      /limits\.amonut: "amonut" is not a property of input_schema/,
    ],
    [
      "a limit threshold that is neither a number nor context.<field>",
      { limits: { amount: { max: "refund_limit" } } },
      /a number or context\.<field>[\s\S]*limits\.amount\.max/,
    ],
  ])(
    "%s: 422 invalid_manifest naming it; GET shows the previous manifest",
    async (_, change, says) => {
      const up = upstream();
      const tool = refundTool(up.url);
      expect((await put(tool)).status).toBe(201);
      const before = await api("GET", `/v1/tools/${tool.name}`);

      const refused = await put({ ...tool, ...change });
      expect(refused.status).toBe(422);
      expect(refused.body.code).toBe("invalid_manifest");
      expect(refused.body.detail).toMatch(says);
      const after = await api("GET", `/v1/tools/${tool.name}`);
      expect(after.body).toEqual(before.body);
      expect(after.body.version).toBe(1);
      // A new name is not stored either.
      const fresh = { ...tool, ...change, name: unique("tool") };
      expect((await put(fresh)).status).toBe(422);
      expect((await api("GET", `/v1/tools/${fresh.name}`)).status).toBe(404);
    },
  );
});

describe("a context field a tool needs: warned wherever it can be, refused at every call that lacks it", () => {
  it("a re-PUT whose limit subject is context.nope is warned at PUT and at run creation; its calls are refused naming context.nope; earlier runs keep the working limit", async () => {
    const up = upstream();
    const tool = refundTool(up.url);
    const name = tool.name as string;
    const first = await put(tool);
    expect(first.status).toBe(201);
    expect(first.body.warnings).toEqual([
      expect.objectContaining({
        code: "context_required",
        fields: [{ field: "customer_id", needed_by: ["bind", "limits_across_runs"] }],
      }),
    ]);
    const earlier = (await newRun([name], { customer_id: "cus_1" })).body;
    expect(contextWarnings(earlier)).toEqual([]);

    // The newcomer's edit: the subject now names a context field no run carries.
    const limits = tool.limits_across_runs as Array<Record<string, unknown>>;
    const edited = { ...tool, limits_across_runs: [{ ...limits[0], subject: "context.nope" }] };
    const replaced = await put(edited);
    expect(replaced.status).toBe(200);
    expect(replaced.body.warnings).toEqual([
      {
        code: "context_required",
        fields: [
          { field: "customer_id", needed_by: ["bind"] },
          { field: "nope", needed_by: ["limits_across_runs"] },
        ],
        added: ["nope"],
        detail: expect.stringMatching(/context\.nope.*new since version 1/),
      },
    ]);

    const later = (await newRun([name], { customer_id: "cus_1" })).body;
    expect(contextWarnings(later)).toEqual([
      {
        tool: name,
        code: "context_missing",
        field: "nope",
        needed_by: ["limits_across_runs"],
        detail: expect.stringContaining("context.nope"),
      },
    ]);
    const refused = await turn(later.run_id, [{ id: "c1", name, arguments: { amount: 10 } }]);
    expect(refused.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(refused.body.results[0].message).toContain("context.nope");

    // The run created before the re-PUT keeps the definition it was created with.
    const kept = await turn(earlier.run_id, [{ id: "c1", name, arguments: { amount: 10 } }]);
    expect(kept.body.results[0].status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a run created without what bind, limits and limits_across_runs read is told, once per field per tool; a complete run is not", async () => {
    const up = upstream();
    const tool = refundTool(up.url, { limits: { amount: { max: "context.refund_limit" } } });
    const other = refundTool(up.url);
    for (const t of [tool, other]) expect((await put(t)).status).toBe(201);
    const names = [tool.name as string, other.name as string];

    const bare = (await newRun(names, {})).body;
    expect(contextWarnings(bare)).toEqual(
      [
        [names[0], "customer_id", ["bind", "limits_across_runs"]],
        [names[0], "refund_limit", ["limits"]],
        [names[1], "customer_id", ["bind", "limits_across_runs"]],
      ].map(([t, field, neededBy]) => ({
        tool: t,
        code: "context_missing",
        field,
        needed_by: neededBy,
        detail: expect.stringContaining(`context.${field as string}`),
      })),
    );
    // The same warnings on the export the agent reads.
    const exported = await api("GET", `/v1/runs/${bare.run_id}/tools`);
    expect(contextWarnings(exported.body)).toEqual(contextWarnings(bare));
    // A limit threshold that is there but not a number is as unusable as an absent one.
    const wrong = (await newRun([names[0]!], { customer_id: "cus_2", refund_limit: "500" })).body;
    expect(contextWarnings(wrong)).toEqual([
      expect.objectContaining({ field: "refund_limit", needed_by: ["limits"] }),
    ]);
    const complete = (await newRun(names, { customer_id: "cus_2", refund_limit: 500 })).body;
    expect(contextWarnings(complete)).toEqual([]);

    // Every call of the bare run is refused, naming what is missing; nothing reaches the shop.
    const res = await turn(bare.run_id, [
      { id: "a", name: names[0]!, arguments: { amount: 10 } },
      { id: "b", name: names[1]!, arguments: { amount: 10 } },
    ]);
    expect(res.body.results.map((r: { code: string }) => r.code)).toEqual([
      "invalid_arguments",
      "invalid_arguments",
    ]);
    expect(res.body.results[0].message).toContain("context.customer_id");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("an empty subject is no subject: refused naming the field, never counted in a bucket every such run shares", async () => {
    const up = upstream();
    const tool = refundTool(up.url, { bind: {}, input_schema: SCHEMA });
    const name = tool.name as string;
    expect((await put(tool)).status).toBe(201);
    const runs = [
      (await newRun([name], { customer_id: "" })).body,
      (await newRun([name], { customer_id: "" })).body,
    ];
    for (const run of runs)
      expect(contextWarnings(run)).toEqual([
        expect.objectContaining({ tool: name, field: "customer_id" }),
      ]);
    for (const run of runs) {
      const res = await turn(run.run_id, [
        { id: "c1", name, arguments: { amount: 600, customer_id: "cus_x" } },
      ]);
      expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });
      expect(res.body.results[0].message).toContain("context.customer_id");
    }
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("PATCH /v1/runs answers warnings as creation does: [] when there are none, context_missing for a tool added without its context", async () => {
    const up = upstream();
    const plain = manifest({ url: up.url });
    const bound = refundTool(up.url);
    for (const t of [plain, bound]) expect((await put(t)).status).toBe(201);
    const run = (await newRun([plain.name as string], {})).body;

    const scopes = await api("PATCH", `/v1/runs/${run.run_id}`, { user: { scopes: ["x"] } });
    expect(scopes.status).toBe(200);
    expect(scopes.body.warnings).toEqual(run.warnings);
    expect(contextWarnings(scopes.body)).toEqual([]);

    const tools = await api("PATCH", `/v1/runs/${run.run_id}`, {
      tools: [plain.name, bound.name],
    });
    expect(tools.status).toBe(200);
    expect(contextWarnings(tools.body)).toEqual([
      expect.objectContaining({
        tool: bound.name,
        field: "customer_id",
        needed_by: ["bind", "limits_across_runs"],
      }),
    ]);
  });

  it("a run with nothing to warn about: creation and PATCH both answer warnings: [] (never null or absent)", async () => {
    const up = upstream();
    // A read tool has no idempotency to verify and needs no context: no warning of any kind.
    const read = manifest({ url: up.url, risk: "read", idempotency: { mode: "none" } });
    expect((await put(read)).status).toBe(201);
    const run = (await newRun([read.name as string], {})).body;
    expect(run.warnings).toEqual([]);
    const patched = await api("PATCH", `/v1/runs/${run.run_id}`, { user: { scopes: [] } });
    expect(patched.status).toBe(200);
    expect(patched.body.warnings).toEqual([]);
  });
});

describe("an unknown webhook event type is named, with the valid ones", () => {
  it("a typo in events: 400 naming the value and listing every valid type; nothing stored", async () => {
    const id = unique("hook");
    const bad = await api("PUT", `/v1/webhooks/${id}`, {
      url: "https://api.example.test/hook",
      events: ["approval.requested", "approval.requsted"],
      format: "standard",
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_request");
    expect(bad.body.detail).toContain('"approval.requsted"');
    expect(bad.body.detail).toContain("events[1]");
    for (const valid of ["*", "approval.requested", "operation.recorded", "lock.waiting_long"])
      expect(bad.body.detail).toContain(`"${valid}"`);
    expect(bad.body.detail).not.toContain('"webhook.test"');
    const missing = await api("PUT", `/v1/webhooks/${id}`, {
      url: "https://api.example.test/hook",
      format: "standard",
    });
    expect(missing.status).toBe(400);
    expect(missing.body.detail).toMatch(/expected array, received undefined[\s\S]*events/);
    const starred = await api("PUT", `/v1/webhooks/${id}`, {
      url: "https://api.example.test/hook",
      events: ["*", "approval.requested"],
      format: "standard",
    });
    expect(starred.status).toBe(400);
    expect(starred.body.detail).toContain('"*" stands alone');
    const format = await api("PUT", `/v1/webhooks/${id}`, {
      url: "https://api.example.test/hook",
      events: ["*"],
      format: "discord",
    });
    expect(format.body.detail).toMatch(/"discord".*"standard", "slack"/);
    const list = await api("GET", "/v1/webhooks");
    expect(list.body.webhooks.map((w: { id: string }) => w.id)).not.toContain(id);
  });
});
