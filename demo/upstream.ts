// A Stripe-like upstream API that counts side effects, for tests, the demo and the bench.
// Every write (POST/PUT/PATCH/DELETE) is one effect unless an Idempotency-Key replays a stored
// one: same key + same body → the stored response; same key + other body → 422; same key while
// the first request is still in flight → 409. Faults are scripted per namespace (first path
// segment after /ns/) and consumed in order, so parallel tests never see each other's faults.
// A namespace can also be told to break one idempotency promise for good (POST /_control/mode,
// `{ "misbehave": [...] }`), to test verification; by default it keeps every promise.
// Webhook receivers: POSTs to paths under /webhooks are logged with their raw body (to verify the
// Standard Webhooks signature) and draw scripted faults like any write (500 N times, hang, redirect).
import { createServer, type IncomingMessage, type ServerResponse, type Server } from "node:http";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import {
  holdSigner,
  lookupPayment,
  newMerchant,
  serveMerchant,
  serveSigner,
  type MerchantState,
} from "./x402-merchant.ts";
import { oauthServer } from "./oauth-server.ts";

export type Fault =
  | { kind: "ok" }
  /** `lookups`: a status lookup that draws this fault answers `status` too (otherwise lookups ignore their fault). */
  | {
      kind: "status";
      status: number;
      retryAfter?: string;
      /** Further answer headers (e.g. the ratelimit-headers draft's RateLimit / RateLimit-Policy). */
      headers?: Record<string, string>;
      commit?: boolean;
      body?: unknown;
      lookups?: boolean;
    }
  /** Answered by a proxy in front of the API (a load balancer, Cloudflare's edge): the API and its idempotency layer never see the request. */
  | { kind: "gateway"; status: number; retryAfter?: string }
  | { kind: "commit_then_hang" }
  | { kind: "commit_then_reset" }
  /** `lookups`: a status lookup that draws this fault hangs too (otherwise lookups ignore their fault). */
  | { kind: "hang"; lookups?: boolean }
  | { kind: "reset" }
  | { kind: "slow"; delayMs: number }
  | { kind: "invalid_json" }
  | { kind: "wrong_shape" }
  | { kind: "huge"; bytes: number }
  /** 200 with a body nested `depth` arrays deep (valid JSON that recursive readers choke on). */
  | { kind: "deep"; depth: number }
  | { kind: "redirect"; location: string; status?: number; commit?: boolean }
  /** 200 and the headers, a first chunk of the body, then nothing more (the connection stays open). */
  | { kind: "headers_then_stall"; commit?: boolean }
  /** 200 and the headers, a first chunk of the body, then the connection is destroyed. */
  | { kind: "headers_then_drop"; commit?: boolean }
  /**
   * Answers `status` with the request's headers in the body (an upstream that echoes credentials);
   * with `header`, as plain text: `prefix` then that request header's value ("invalid key sk_…").
   */
  | { kind: "echo"; status?: number; header?: string; prefix?: string };

/**
 * Opt-in, per namespace: `ignores_key` (every write is a new effect, the key is never looked at),
 * `accepts_changed_body` (same key + other body → a new effect instead of 422),
 * `races_concurrent_duplicates` (two writes with a new key arriving together both commit: the
 * check-then-commit race), `lookup_never_finds` (GET /effects always answers 404).
 */
export const MISBEHAVIOURS = [
  "ignores_key",
  "accepts_changed_body",
  "races_concurrent_duplicates",
  "lookup_never_finds",
] as const;
export type Misbehaviour = (typeof MISBEHAVIOURS)[number];

type StoredResponse = { status: number; body: unknown };
type KeyEntry = { bodyHash: string; response?: StoredResponse };
/** `request`: the index in the request log of the request that committed it. */
type Effect = {
  id: string;
  method: string;
  path: string;
  key: string | null;
  body: unknown;
  request: number;
};
type RequestLog = {
  method: string;
  path: string;
  key: string | null;
  fencingToken: string | null;
  authorization: string | null;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** The scripted fault this request drew ("ok" when none). */
  fault: Fault["kind"];
  /** Webhook receivers (paths under /webhooks): the body exactly as sent, to verify its signature. */
  raw?: string;
  /** When it arrived: the test clock if one is set (POST /_control/clock), else the wall clock. */
  atMs: number;
};

type Namespace = {
  faults: Fault[];
  /** X-Client-Reference → stored response: searchable by the status lookup, never deduplicated. */
  references: Map<string, StoredResponse>;
  requests: RequestLog[];
  effects: Effect[];
  keys: Map<string, KeyEntry>;
  waiters: Array<{ count: number; what: "requests" | "effects"; resolve: () => void }>;
  /** Writes in flight now, and the most ever in flight at once, per path and in all (lock tests). */
  inFlight: Map<string, number>;
  maxInFlight: Record<string, number>;
  misbehave: Set<Misbehaviour>;
  /** races_concurrent_duplicates: writes with a new key waiting for a duplicate to arrive. */
  racing: Map<string, Array<() => void>>;
  /** The test's clock (POST /_control/clock): stamps `atMs` when set, so a test with a scripted clock reads arrivals on it. */
  clockMs: number | null;
  /** The fake x402 merchant and facilitator under /x402/ (demo/x402-merchant.ts). */
  x402: MerchantState;
};

export type Upstream = { port: number; url: string; close(): Promise<void> };

export async function startUpstream(port = 0, host = "127.0.0.1"): Promise<Upstream> {
  const namespaces = new Map<string, Namespace>();
  const ns = (name: string): Namespace => {
    let found = namespaces.get(name);
    if (!found) {
      found = {
        faults: [],
        references: new Map(),
        requests: [],
        effects: [],
        keys: new Map(),
        waiters: [],
        inFlight: new Map(),
        maxInFlight: {},
        misbehave: new Set(),
        racing: new Map(),
        clockMs: null,
        x402: newMerchant(),
      };
      namespaces.set(name, found);
    }
    return found;
  };
  let effectSeq = 0;
  // The local OAuth authorization server (demo/oauth-server.ts): /as/<ns>/… and its metadata.
  const oauth = oauthServer();
  const hanging = new Set<ServerResponse>();

  const server: Server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://upstream.local");
      const raw = await readBody(req);
      if (url.pathname.startsWith("/_control/")) return control(url, raw, res);
      // The issuer's own origin, as its clients reach it (metadata names absolute endpoints).
      const asUrl = new URL(req.url ?? "/", `http://${req.headers.host ?? "127.0.0.1"}`);
      if (oauth.serve(asUrl, req.method ?? "GET", raw, header(req, "authorization"), res)) return;
      const match = /^\/ns\/([^/]+)(\/.*)?$/.exec(url.pathname);
      const space = ns(match?.[1] ?? "default");
      const path = match ? (match[2] ?? "/") : url.pathname;
      return await serve(space, req, res, path, url, raw);
    } catch (error) {
      json(res, 500, { error: String(error) });
    }
  });

  function control(url: URL, raw: string, res: ServerResponse): void {
    const space = ns(url.searchParams.get("ns") ?? "default");
    switch (url.pathname) {
      case "/_control/oauth":
        return raw
          ? oauth.control(url.searchParams.get("ns") ?? "default", raw, res)
          : oauth.state(url.searchParams.get("ns") ?? "default", res);
      case "/_control/script":
        space.faults.push(...(JSON.parse(raw || "[]") as Fault[]));
        return json(res, 200, { queued: space.faults.length });
      case "/_control/clock":
        // Arrivals are stamped with the test's clock from now on (quota tests script time).
        space.clockMs = (JSON.parse(raw || "{}") as { ms?: number }).ms ?? null;
        return json(res, 200, { clockMs: space.clockMs });
      case "/_control/clear":
        // The outage is over: faults still queued are dropped (requests and effects are kept).
        space.faults.length = 0;
        return json(res, 200, { queued: 0 });
      case "/_control/mode": {
        const requested = (JSON.parse(raw || "{}") as { misbehave?: string[] }).misbehave ?? [];
        const unknown = requested.filter((m) => !(MISBEHAVIOURS as readonly string[]).includes(m));
        if (unknown.length > 0)
          return json(res, 400, { error: `unknown misbehaviour: ${unknown.join(", ")}` });
        space.misbehave = new Set(requested as Misbehaviour[]);
        return json(res, 200, { misbehave: [...space.misbehave] });
      }
      case "/_control/x402":
        // What the merchant asks for from now on (amount, payTo, asset, network, scheme).
        Object.assign(space.x402.config, JSON.parse(raw || "{}"));
        return json(res, 200, space.x402.config);
      case "/_control/x402-signer":
        // `{ "hold": true }`: the signer's answers wait; `{ "hold": false }` sends those held.
        holdSigner(space.x402, (JSON.parse(raw || "{}") as { hold?: boolean }).hold === true);
        return json(res, 200, { held: space.x402.signerHeld?.length ?? null });
      case "/_control/state":
        return json(res, 200, {
          x402: { settlements: space.x402.settlements },
          requests: space.requests,
          effects: space.effects,
          effectsByKey: countBy(space.effects, (e) => e.key ?? "(none)"),
          maxInFlight: space.maxInFlight,
          pendingFaults: space.faults.length,
          misbehave: [...space.misbehave],
        });
      case "/_control/wait": {
        // Resolves once the namespace has seen `requests` requests, or committed `effects` effects
        // (bounded by a 10 s cap).
        const what = url.searchParams.has("effects") ? "effects" : "requests";
        const count = Number(url.searchParams.get(what) ?? "1");
        const seen = () => (what === "effects" ? space.effects.length : space.requests.length);
        const done = () =>
          json(res, 200, { requests: space.requests.length, effects: space.effects.length });
        if (seen() >= count) return done();
        const timer = setTimeout(done, 10_000);
        space.waiters.push({ count, what, resolve: () => (clearTimeout(timer), done()) });
        return;
      }
      default:
        return json(res, 404, { error: "unknown control endpoint" });
    }
  }

  async function serve(
    space: Namespace,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    url: URL,
    raw: string,
  ): Promise<void> {
    const method = req.method ?? "GET";
    const key = header(req, "idempotency-key");
    const body = parseJson(raw);
    // The tenant's x402 signer draws no fault: the merchant's requests keep their scripted order.
    const signer = method === "POST" && path === "/webhooks/x402-signer";
    const fault = signer ? { kind: "ok" as const } : (space.faults.shift() ?? { kind: "ok" });
    const requestIndex = space.requests.length;
    space.requests.push({
      method,
      path: path + url.search,
      key,
      fencingToken: header(req, "toolgate-fencing-token"),
      authorization: header(req, "authorization"),
      headers: req.headers,
      body,
      fault: fault.kind,
      atMs: space.clockMs ?? Date.now(),
      ...(path.startsWith("/webhooks") ? { raw } : {}),
    });
    wake(space);
    if (method !== "GET" && method !== "HEAD") {
      // Overlap accounting: a write counts from its arrival until its response ends or its socket closes.
      for (const scope of [path, "*"]) {
        const now = (space.inFlight.get(scope) ?? 0) + 1;
        space.inFlight.set(scope, now);
        space.maxInFlight[scope] = Math.max(space.maxInFlight[scope] ?? 0, now);
      }
      let counted = true;
      res.once("close", () => {
        if (!counted) return;
        counted = false;
        for (const scope of [path, "*"])
          space.inFlight.set(scope, (space.inFlight.get(scope) ?? 1) - 1);
      });
    }
    const isWrite = method !== "GET" && method !== "HEAD";
    if (signer) return serveSigner(space.x402, body, (status, out) => json(res, status, out));

    if (method === "GET" && path.startsWith("/x402/payments/"))
      return lookupPayment(
        space.x402,
        decodeURIComponent(path.slice("/x402/payments/".length)),
        (status, out, headers) => json(res, status, out, headers),
      );

    // Status lookup: GET /effects?idempotency_key=K → 200 with the stored response body, or 404.
    // K matches an Idempotency-Key or an X-Client-Reference sent with the original write.
    if (method === "GET" && path === "/effects") {
      if (fault.kind === "status" && fault.lookups)
        return json(res, fault.status, { error: `scripted ${fault.status}` });
      if (fault.kind === "hang" && fault.lookups) return void hanging.add(res);
      if (space.misbehave.has("lookup_never_finds"))
        return json(res, 404, { error: "no such effect" });
      const lookupKey = url.searchParams.get("idempotency_key") ?? "";
      const stored = space.keys.get(lookupKey)?.response ?? space.references.get(lookupKey);
      return stored ? json(res, 200, stored.body) : json(res, 404, { error: "no such effect" });
    }

    const commit = (): StoredResponse => {
      effectSeq += 1;
      const id = `eff_${effectSeq}`;
      space.effects.push({ id, method, path, key, body, request: requestIndex });
      wake(space);
      const response: StoredResponse = {
        status: 200,
        body: { id, status: "succeeded", ...(isObject(body) ? body : {}) },
      };
      if (key) space.keys.set(key, { bodyHash: sha(raw), response });
      const reference = header(req, "x-client-reference");
      if (reference) space.references.set(reference, response);
      return response;
    };

    if (isWrite && path.startsWith("/x402/"))
      return serveMerchant(
        space.x402,
        req,
        res,
        fault,
        commit,
        () => void hanging.add(res),
        (status, out, headers) => json(res, status, out, headers),
      );

    if (fault.kind === "gateway") {
      return json(
        res,
        fault.status,
        { error: `gateway answered ${fault.status}` },
        { Server: "cloudflare", ...(fault.retryAfter ? { "Retry-After": fault.retryAfter } : {}) },
      );
    }

    if (isWrite && key && !space.misbehave.has("ignores_key")) {
      const entry = space.keys.get(key);
      const changedBody = entry !== undefined && entry.bodyHash !== sha(raw);
      if (changedBody && !space.misbehave.has("accepts_changed_body")) {
        return json(res, 422, { error: "idempotency key reused with a different request body" });
      }
      if (!entry && space.misbehave.has("races_concurrent_duplicates")) {
        await raceDuplicate(space, key);
      } else if (!changedBody) {
        if (entry && !entry.response)
          return json(res, 409, { error: "request with this key in progress" });
        if (entry?.response)
          return json(res, entry.response.status, entry.response.body, {
            "Idempotent-Replayed": "true",
          });
      }
      // Otherwise (accepts_changed_body) the other body runs as a new effect under the same key.
    }

    switch (fault.kind) {
      case "ok":
        if (!isWrite) return json(res, 200, { id: path.split("/").pop(), status: "ok", path });
        return json(res, 200, commit().body);
      case "status":
        if (fault.commit && isWrite) commit();
        return json(res, fault.status, fault.body ?? { error: `scripted ${fault.status}` }, {
          ...(fault.retryAfter ? { "Retry-After": fault.retryAfter } : {}),
          ...fault.headers,
        });
      case "commit_then_hang":
        if (isWrite) commit();
        hanging.add(res);
        return;
      case "hang":
        if (isWrite && key) space.keys.set(key, { bodyHash: sha(raw) }); // in flight: concurrent key → 409
        hanging.add(res);
        return;
      case "commit_then_reset":
        if (isWrite) commit();
        req.socket.destroy();
        return;
      case "reset":
        req.socket.destroy();
        return;
      case "slow": {
        if (isWrite && key) space.keys.set(key, { bodyHash: sha(raw) });
        await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
        if (!isWrite) return json(res, 200, { id: path.split("/").pop(), status: "ok", path });
        return json(res, 200, commit().body);
      }
      case "invalid_json":
        if (isWrite) commit();
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end("{not json");
        return;
      case "wrong_shape":
        if (isWrite) commit();
        return json(res, 200, { unexpected: true });
      case "huge":
        if (isWrite) commit();
        return json(res, 200, { id: "eff_huge", padding: "x".repeat(fault.bytes) });
      case "deep":
        if (isWrite) commit();
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(`{"id":"eff_deep","nested":${"[".repeat(fault.depth)}${"]".repeat(fault.depth)}}`);
        return;
      case "echo":
        if (fault.header !== undefined) {
          res.writeHead(fault.status ?? 200, { "Content-Type": "text/plain" });
          res.end(`${fault.prefix ?? ""}${header(req, fault.header.toLowerCase()) ?? ""}`);
          return;
        }
        return json(res, fault.status ?? 200, { id: "echo", headers: req.headers });
      case "redirect":
        if (fault.commit && isWrite) commit();
        res.writeHead(fault.status ?? 302, { Location: fault.location });
        res.end();
        return;
      case "headers_then_stall":
      case "headers_then_drop": {
        const stored =
          fault.commit !== false && isWrite
            ? commit().body
            : { id: path.split("/").pop(), status: "ok", path };
        const text = JSON.stringify(stored);
        // Content-Length promises the whole body; only its first half is ever written.
        res.writeHead(200, {
          "Content-Type": "application/json",
          "Content-Length": String(text.length),
        });
        hanging.add(res);
        // The callback runs once the chunk is handed to the socket, so the client has the headers.
        res.write(text.slice(0, Math.floor(text.length / 2)), () => {
          if (fault.kind === "headers_then_drop") res.socket?.destroy();
        });
        return;
      }
    }
  }

  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const actualPort = (server.address() as AddressInfo).port;
  return {
    port: actualPort,
    url: `http://${host}:${actualPort}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.socket?.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * races_concurrent_duplicates: a write that found no entry for its key commits without checking
 * again. It waits (up to 1 s) for a duplicate to arrive, so the race is deterministic: both commit.
 */
function raceDuplicate(space: Namespace, key: string): Promise<void> {
  const waiting = space.racing.get(key);
  if (waiting) {
    space.racing.delete(key);
    waiting.forEach((resolve) => resolve());
    return Promise.resolve();
  }
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      space.racing.delete(key);
      resolve();
    }, 1_000);
    space.racing.set(key, [() => (clearTimeout(timer), resolve())]);
  });
}

function wake(space: Namespace): void {
  const seen = { requests: space.requests.length, effects: space.effects.length };
  for (const waiter of space.waiters.filter((w) => seen[w.what] >= w.count)) {
    space.waiters.splice(space.waiters.indexOf(waiter), 1);
    waiter.resolve();
  }
}

function header(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  return typeof value === "string" ? value : null;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function parseJson(raw: string): unknown {
  if (!raw) return null;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const sha = (raw: string) => createHash("sha256").update(raw).digest("hex");

function countBy<T>(items: T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
