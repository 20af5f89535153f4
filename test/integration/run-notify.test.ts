// Issue 18 item 6: an agent that does not wait names one of its tenant's webhook endpoints at run
// creation (`notify.webhook_id`) and gets that run's turn.settled there, signed, even when the
// endpoint's events filter does not include turn.settled; other runs' turns are not sent there.
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { api, manifest, turn, upstream } from "../support/api.ts";

type Payload = { type: string; data: { run_id: string | null } };

async function hook(id: string, url: string, events: string[]): Promise<string> {
  const put = await api("PUT", `/v1/webhooks/${id}`, { url, events, format: "standard" });
  expect(put.status).toBe(201);
  return put.body.secret as string;
}

describe("a run's notify webhook", () => {
  it(
    "gets the run's turn.settled, signed, though its filter names only another type; another run's turns are not sent there",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
      const secret = await hook(id, `${up.url}/webhooks/n`, ["approval.expired"]);
      const tool = manifest({ url: `${up.url}/charges` });
      expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBeLessThan(300);
      const other = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] });
      expect(other.status).toBe(201);
      const mine = await api("POST", "/v1/runs", {
        user: { id: "u1" },
        tools: [tool.name],
        notify: { webhook_id: id },
      });
      expect(mine.status).toBe(201);
      const call = (runId: string) =>
        turn(runId, [
          { id: "c1", name: tool.name as string, arguments: { amount: 1, currency: "usd" } },
        ]);
      // The other run's turn settles first: had it gone to this endpoint, it would arrive first.
      expect((await call(other.body.run_id)).body.results[0].status).toBe("succeeded");
      expect((await call(mine.body.run_id)).body.results[0].status).toBe("succeeded");

      let got: Payload[] = [];
      for (let i = 0; i < 400 && got.length === 0; i++) {
        got = (await up.state()).requests
          .filter((request) => request.path === "/webhooks/n")
          .map(
            (request) =>
              new Webhook(secret).verify(
                request.raw!,
                request.headers as Record<string, string>,
              ) as Payload,
          );
        if (got.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(got.length).toBeGreaterThan(0);
      for (const payload of got) {
        expect(payload.type).toBe("turn.settled");
        expect(payload.data.run_id).toBe(mine.body.run_id);
      }
    },
  );

  it("an unknown webhook id is refused at POST /v1/runs, and no run is created", async () => {
    const up = upstream();
    const tool = manifest({ url: `${up.url}/charges` });
    expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBeLessThan(300);
    const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
    const body = {
      user: { id: "u1" },
      tools: [tool.name],
      notify: { webhook_id: id },
      request_id: crypto.randomUUID(),
    };
    const refused = await api("POST", "/v1/runs", body);
    expect(refused.status).toBe(404);
    expect(refused.body.code).toBe("not_found");
    // Nothing was created under that request_id: once the endpoint exists, the same request
    // creates the run (201), not a replay of an earlier one (200).
    await hook(id, `${up.url}/webhooks/x`, ["turn.settled"]);
    expect((await api("POST", "/v1/runs", body)).status).toBe(201);
    const bad = await api("POST", "/v1/runs", { ...body, notify: { webhook_id: id, url: "x" } });
    expect(bad.status).toBe(400);
  });
});
