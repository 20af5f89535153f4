// Benchmark baselines. (a) POST /direct: the Worker fetches the upstream, no durability.
// (b) POST /durable: the minimal durable floor — a new Durable Object per operation that writes its
// intent, fetches, and writes the result, in SQLite; rows come back in X-Rows-Read/X-Rows-Written.
// (w) POST /workflow: the same durable call as a one-step Cloudflare Workflow (`step.do`), the peer
// a user would otherwise pick; the Worker creates the instance and answers once it is complete,
// polling its status as a caller of a Workflow must: after 5 ms, then doubling up to 50 ms (a fixed
// 5 ms poll from 16 callers starves the local Workflows engine until every instance stalls).
import { DurableObject, WorkflowEntrypoint, type WorkflowStep } from "cloudflare:workers";
import type { WorkflowEvent } from "cloudflare:workers";

type Env = {
  FLOOR: DurableObjectNamespace<DurableFloor>;
  FLOW: Workflow<{ body: string }>;
  UPSTREAM_URL: string;
  WORKFLOW_POLL_MS?: string;
};

export class DurableFloor extends DurableObject<Env> {
  async run(
    body: string,
  ): Promise<{ status: number; text: string; rowsRead: number; rowsWritten: number }> {
    const sql = this.ctx.storage.sql;
    let read = 0;
    let written = 0;
    const exec = (query: string, ...bindings: SqlStorageValue[]) => {
      const cursor = sql.exec(query, ...bindings);
      cursor.toArray();
      read += cursor.rowsRead;
      written += cursor.rowsWritten;
    };
    exec("CREATE TABLE IF NOT EXISTS op (seq INTEGER PRIMARY KEY, state TEXT NOT NULL, body TEXT)");
    exec("INSERT INTO op (seq, state, body) VALUES (1, 'executing', ?)", body);
    const key = this.ctx.id.toString();
    const response = await fetch(`${this.env.UPSTREAM_URL}/charges`, {
      method: "POST",
      body,
      headers: { "Content-Type": "application/json", "Idempotency-Key": key },
    });
    const text = await response.text();
    exec("INSERT INTO op (seq, state, body) VALUES (2, 'recorded', ?)", text);
    return { status: response.status, text, rowsRead: read, rowsWritten: written };
  }
}

/** One durable step: the upstream call, its answer recorded by the Workflow engine. */
export class ChargeFlow extends WorkflowEntrypoint<Env, { body: string }> {
  override async run(event: WorkflowEvent<{ body: string }>, step: WorkflowStep) {
    return step.do("charge", async () => {
      const response = await fetch(`${this.env.UPSTREAM_URL}/charges`, {
        method: "POST",
        body: event.payload.body,
        headers: { "Content-Type": "application/json", "Idempotency-Key": event.instanceId },
      });
      return { status: response.status, text: await response.text() };
    });
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const body = await request.text();
    if (url.pathname === "/direct") {
      const upstream = await fetch(`${env.UPSTREAM_URL}/charges`, {
        method: "POST",
        body,
        headers: { "Content-Type": "application/json" },
      });
      return new Response(await upstream.text(), {
        status: upstream.status,
        headers: { "Content-Type": "application/json", "X-Rows-Read": "0", "X-Rows-Written": "0" },
      });
    }
    if (url.pathname === "/durable") {
      const stub = env.FLOOR.get(env.FLOOR.idFromName(crypto.randomUUID()));
      const result = await stub.run(body);
      return new Response(result.text, {
        status: result.status,
        headers: {
          "Content-Type": "application/json",
          "X-Rows-Read": String(result.rowsRead),
          "X-Rows-Written": String(result.rowsWritten),
        },
      });
    }
    if (url.pathname === "/workflow") {
      const instance = await env.FLOW.create({ params: { body } });
      for (let pollMs = Number(env.WORKFLOW_POLL_MS ?? 5); ; pollMs = Math.min(2 * pollMs, 50)) {
        const status = await instance.status();
        if (status.status === "complete") {
          const output = status.output as { status: number; text: string };
          return new Response(output.text, {
            status: output.status,
            headers: { "Content-Type": "application/json" },
          });
        }
        if (status.status === "errored" || status.status === "terminated")
          return new Response(JSON.stringify(status), { status: 500 });
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    }
    return url.pathname === "/healthz"
      ? new Response("ok")
      : new Response("not found", { status: 404 });
  },
};
