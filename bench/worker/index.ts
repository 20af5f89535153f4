// Benchmark baselines. (a) POST /direct: the Worker fetches the upstream, no durability.
// (b) POST /durable: the minimal durable floor — a new Durable Object per operation that writes its
// intent, fetches, and writes the result, in SQLite; rows written come back in X-Rows-Written.
import { DurableObject } from "cloudflare:workers";

type Env = { FLOOR: DurableObjectNamespace<DurableFloor>; UPSTREAM_URL: string };

export class DurableFloor extends DurableObject<Env> {
  async run(body: string): Promise<{ status: number; text: string; rowsWritten: number }> {
    const sql = this.ctx.storage.sql;
    let rows = 0;
    const exec = (query: string, ...bindings: SqlStorageValue[]) => {
      const cursor = sql.exec(query, ...bindings);
      cursor.toArray();
      rows += cursor.rowsWritten;
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
    return { status: response.status, text, rowsWritten: rows };
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
        headers: { "Content-Type": "application/json", "X-Rows-Written": "0" },
      });
    }
    if (url.pathname === "/durable") {
      const stub = env.FLOOR.get(env.FLOOR.idFromName(crypto.randomUUID()));
      const result = await stub.run(body);
      return new Response(result.text, {
        status: result.status,
        headers: {
          "Content-Type": "application/json",
          "X-Rows-Written": String(result.rowsWritten),
        },
      });
    }
    return url.pathname === "/healthz"
      ? new Response("ok")
      : new Response("not found", { status: 404 });
  },
};
