// Edit-on-approve through the public API (issue 35 item 2), counted at the upstream: an approver's
// edited arguments become a new frozen version (validated, bound fields untouchable, Cedar and the
// limits across runs checked again, the reservation re-sized), the approval binds to its hash,
// under four eyes the editor cannot approve their own edit, and the model is told what ran — the
// same words on every re-post.
import { describe, expect, it } from "vitest";
import { api, unique, upstream } from "../support/api.ts";
import { seniorOnlyOver500, tenantWithRefunds } from "../support/cedar.ts";

/** A refund tool asking a person always, with a limit across runs of 150 per customer per day. */
async function refunds(fourEyes: boolean) {
  const up = upstream();
  const t = await tenantWithRefunds(up.url, {
    approval: { mode: "always", four_eyes: fourEyes },
    limits_across_runs: [
      {
        name: unique("refunds_day"),
        subject: "context.customer_id",
        window: "24h",
        sum: "amount",
        max: 150,
      },
    ],
  });
  expect((await t.putPolicies(seniorOnlyOver500(t.name))).status).toBe(201);
  const runId = await t.run();
  const callId = unique("call");
  const turn = { calls: [{ id: callId, name: t.name, arguments: { amount: 100 } }] };
  const post = async (wait: number) =>
    (
      await api("POST", `/v1/runs/${runId}/turns?format=native`, turn, {
        ...t.as,
        Prefer: `wait=${wait}`,
      })
    ).body.results[0];
  const first = await post(0);
  expect(first.status).toBe("awaiting_approval");
  const id = first.operation_id as string;
  const view = async () => (await api("GET", `/v1/operations/${id}`, undefined, t.as)).body;
  const hash = (await view()).input_hash as string;
  const approve = (body: Record<string, unknown>, by = "alice") =>
    api("POST", `/v1/operations/${id}/approve`, { approver: { id: by }, ...body }, t.as);
  const used = async () =>
    (await api("GET", `/v1/approvals/${id}`, undefined, t.as)).body.limits[0].usage.used;
  const events = async () =>
    (await api("GET", `/v1/runs/${runId}/trace`, undefined, t.as)).body.events as Array<
      Record<string, any>
    >;
  return { up, t, id, hash, view, approve, used, post, events };
}

describe("edit-on-approve", () => {
  it("an edit that lowers the amount: the upstream gets exactly the edited body once; the model is told what ran, the same on a re-post", async () => {
    const r = await refunds(false);
    const reason = "Policy caps goodwill refunds at 40 — “partial”, per ticket #12";
    const edited = await r.approve({ input_hash: r.hash, arguments: { amount: 40 }, reason });
    expect(edited.status).toBe(200);
    const newHash = edited.body.input_hash as string;
    expect(newHash).not.toBe(r.hash);
    await r.up.waitForEffects(1);
    const state = await r.up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
    expect(state.effects[0]!.body).toEqual({ amount: 40, customer_id: "cus_1" });
    // The model reads the executed arguments (bound fields left out), the difference, the reason verbatim.
    const result = await r.post(5);
    expect(result.status).toBe("succeeded");
    expect(result.edited).toEqual({
      arguments: { amount: 40 },
      changes: [{ field: "amount", proposed: 100, executed: 40 }],
      reason,
      note: expect.stringContaining("amount: 100 → 40"),
    });
    expect(await r.post(5)).toEqual(result);
    expect((await r.up.state()).requests).toHaveLength(1);
    // The reservation was re-sized to what ran.
    expect(await r.used()).toBe(40);
    // The trace: who edited, via what, the old and new hashes, the reason; then the approval of the new hash.
    const trail = await r.events();
    expect(trail.find((e) => e.type === "approval_edited")).toMatchObject({
      by: "alice",
      via: "delegated",
      from_input_hash: r.hash,
      input_hash: newHash,
      reason,
    });
    expect(trail.find((e) => e.type === "approval_decided")).toMatchObject({
      verdict: "approve",
      by: "alice",
    });
  });

  it.each([
    ["breaks the schema", { amount: "lots" }, 422, "invalid_arguments"],
    ["touches a bound field", { amount: 40, customer_id: "cus_2" }, 422, "field_not_editable"],
    ["exceeds the limit across runs", { amount: 200 }, 422, "policy_denied"],
    ["trips a Cedar forbid", { amount: 600 }, 422, "policy_denied"],
  ] as const)(
    "an edit that %s is refused: nothing sent, still awaiting with its original hash and reservation",
    async (_what, args, status, code) => {
      const r = await refunds(false);
      const refused = await r.approve({ input_hash: r.hash, arguments: args });
      expect(refused.status).toBe(status);
      expect(refused.body.code).toBe(code);
      if (args.amount === 600) expect(refused.body.detail).toContain("access policy");
      if (args.amount === 200) expect(refused.body.detail).not.toContain("access policy");
      const view = await r.view();
      expect(view.phase).toBe("awaiting_approval");
      expect(view.input_hash).toBe(r.hash);
      expect(view.approval.input_hash).toBe(r.hash);
      expect(view.edited).toBeUndefined();
      expect(await r.used()).toBe(100);
      expect((await r.events()).some((e) => e.type === "approval_edited")).toBe(false);
      // The original is still approvable as it was, and runs as proposed.
      expect((await r.approve({ input_hash: r.hash }, "bob")).status).toBe(200);
      await r.up.waitForEffects(1);
      const state = await r.up.state();
      expect(state.requests).toHaveLength(1);
      expect(state.effects[0]!.body).toEqual({ amount: 100, customer_id: "cus_1" });
    },
  );

  it("under four eyes the editor cannot approve their own edit; the old hash is stale; another person's approval of the edited hash sends it", async () => {
    const r = await refunds(true);
    const edited = await r.approve({ input_hash: r.hash, arguments: { amount: 40 } }, "alice");
    expect(edited.status).toBe(200);
    expect(edited.body.phase).toBe("awaiting_approval");
    const newHash = edited.body.input_hash as string;
    expect(edited.body.approval.input_hash).toBe(newHash);
    expect((await r.up.state()).requests).toHaveLength(0);
    const own = await r.approve({ input_hash: newHash }, "alice");
    expect(own.status).toBe(403);
    expect(own.body.code).toBe("self_approval");
    const stale = await r.approve({ input_hash: r.hash }, "bob");
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe("approval_mismatch");
    // An edit of the old version is stale too: nothing changes.
    const staleEdit = await r.approve({ input_hash: r.hash, arguments: { amount: 30 } }, "bob");
    expect(staleEdit.status).toBe(409);
    expect((await r.view()).input_hash).toBe(newHash);
    expect((await r.up.state()).requests).toHaveLength(0);
    expect((await r.approve({ input_hash: newHash }, "bob")).status).toBe(200);
    await r.up.waitForEffects(1);
    const state = await r.up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects[0]!.body).toEqual({ amount: 40, customer_id: "cus_1" });
    const result = await r.post(5);
    expect(result.edited.arguments).toEqual({ amount: 40 });
    expect((await r.events()).filter((e) => e.type === "approval_decided")).toEqual([
      expect.objectContaining({ by: "bob", verdict: "approve" }),
    ]);
  });
});
