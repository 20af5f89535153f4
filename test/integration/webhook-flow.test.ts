// Issue 18 end to end: a transition's event goes from the operation's outbox through the EVENTS
// queue to the consumer, which stores it and delivers it to the tenant's webhook endpoints; a failed
// endpoint is retried by its own delayed queue message with the same webhook-id. The receiver (the
// fault-injecting upstream, paths under /webhooks) checks every signature with `standardwebhooks`.
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { api, manifest, setup, turn, upstream, type UpstreamState } from "../support/api.ts";

type Got = { path: string; webhookId: string; type: string | null; ok: boolean; fault: unknown };

function received(state: UpstreamState, secrets: Record<string, string>): Got[] {
  return state.requests
    .filter((request) => request.path.startsWith("/webhooks"))
    .map((request) => {
      const headers = request.headers as Record<string, string>;
      const secret = secrets[request.path]!;
      let payload: { type?: string } | null = null;
      try {
        payload = new Webhook(secret).verify(request.raw!, headers) as { type?: string };
      } catch {
        payload = null;
      }
      return {
        path: request.path,
        webhookId: headers["webhook-id"]!,
        type: payload?.type ?? null,
        ok: payload !== null,
        fault: request.fault,
      };
    });
}

/** Polls the receiver (bounded) until `done` holds. */
async function until(
  up: ReturnType<typeof upstream>,
  secrets: Record<string, string>,
  done: (got: Got[]) => boolean,
  tries = 400,
): Promise<Got[]> {
  let got: Got[] = [];
  for (let i = 0; i < tries; i++) {
    got = received(await up.state(), secrets);
    if (done(got)) return got;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return got;
}

async function hook(url: string, events: string[]): Promise<string> {
  const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
  const put = await api("PUT", `/v1/webhooks/${id}`, { url, events, format: "standard" });
  expect(put.status).toBe(201);
  return put.body.secret as string;
}

describe("webhooks fed by the event outbox", () => {
  it(
    "an approval request reaches every subscribed endpoint once, signed; a dead endpoint is retried on its own with the same webhook-id",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      // The receiver answers the first delivery 500 (then 200): that endpoint's retry is a delayed
      // queue message of its own.
      await up.script({ kind: "status", status: 500, body: { error: "down" } });
      const secrets = {
        "/webhooks/a": await hook(`${up.url}/webhooks/a`, ["approval.requested"]),
        "/webhooks/b": await hook(`${up.url}/webhooks/b`, ["approval.requested"]),
      };
      const tool = manifest({ url: `${up.url}/charges`, approval: "always" });
      const { runId, name } = await setup(tool);
      const res = await turn(runId, [
        { id: "c1", name, arguments: { amount: 5, currency: "usd" } },
      ]);
      expect(res.body.results[0].status).toBe("awaiting_approval");

      const got = await until(
        up,
        secrets,
        (all) => all.filter((g) => g.fault === "ok").length >= 2,
      );
      const delivered = got.filter((g) => g.fault === "ok");
      expect(new Set(delivered.map((g) => g.path))).toEqual(
        new Set(["/webhooks/a", "/webhooks/b"]),
      );
      expect(got.every((g) => g.ok && g.type === "approval.requested")).toBe(true);
      // One event, one id everywhere: the failed attempt and its retry carry it too.
      expect(new Set(got.map((g) => g.webhookId)).size).toBe(1);
      // The one scripted 500 hit whichever endpoint was first; that endpoint alone was retried (its
      // own delayed message), the other got the event exactly once.
      const counts = ["/webhooks/a", "/webhooks/b"]
        .map((path) => got.filter((g) => g.path === path).length)
        .sort();
      expect(counts).toEqual([1, 2]);
      expect(got.filter((g) => g.fault !== "ok")).toHaveLength(1);
      // Nothing was sent to the tool: it waits for a person.
      expect((await up.state()).requests.filter((r) => r.path.startsWith("/charges"))).toHaveLength(
        0,
      );
    },
  );

  it(
    "an endpoint subscribed to other types receives nothing for this event",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const secrets = {
        "/webhooks/recorded-only": await hook(`${up.url}/webhooks/recorded-only`, [
          "operation.outcome_unknown",
        ]),
        "/webhooks/all": await hook(`${up.url}/webhooks/all`, ["*"]),
      };
      const { runId, name } = await setup(
        manifest({ url: `${up.url}/charges`, approval: "always" }),
      );
      await turn(runId, [{ id: "c1", name, arguments: { amount: 6, currency: "usd" } }]);
      const got = await until(up, secrets, (all) => all.some((g) => g.path === "/webhooks/all"));
      expect(got.map((g) => g.path)).toEqual(["/webhooks/all"]);
    },
  );
});
