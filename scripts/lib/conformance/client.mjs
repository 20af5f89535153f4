// The conformance suite's view of a deployment: the public HTTP API only, every response's text
// kept (so the secrets check can search everything the deployment ever answered), and the suite's
// own test upstream (demo/upstream.ts) read through its control endpoints on loopback. The admin
// token and the tenant keys go only where `targetProblem` allows, and never follow a redirect.

const LOOPBACK = /^(localhost|.+\.localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/**
 * Why the suite refuses to send credentials to `url` (null: it may). https anywhere; plain http
 * only to a loopback host (a local `wrangler dev`): elsewhere the admin token would cross the
 * network in clear text.
 */
export function targetProblem(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return `--url ${JSON.stringify(url)} is not a URL`;
  }
  if (parsed.protocol === "https:") return null;
  if (parsed.protocol !== "http:")
    return `--url must be https (or plain http to a loopback host), not ${parsed.protocol}`;
  if (LOOPBACK.test(parsed.hostname)) return null;
  return `refusing to send the admin token over plain http to ${parsed.host}: use https (plain http only to a loopback host, e.g. a local wrangler dev)`;
}

/** A JSON client for one deployment; `seen` holds every response body it received. */
export function deploymentClient(baseUrl, { timeoutMs = 20_000 } = {}) {
  const refused = targetProblem(baseUrl);
  if (refused) throw new Error(refused);
  const seen = [];
  async function call(method, path, token, body, headers = {}) {
    const init = {
      method,
      headers: { Authorization: `Bearer ${token}`, ...headers },
      signal: AbortSignal.timeout(timeoutMs),
      // A redirect would carry the token elsewhere (or to plain http): it is an answer, not a hop.
      redirect: "manual",
    };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(`${baseUrl}${path}`, init);
    const text = await response.text();
    seen.push(text);
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    return { status: response.status, body: parsed, text };
  }
  return { url: baseUrl, call, seen };
}

/** One namespace of the test upstream: its URL as the deployment reaches it, and its ledger. */
export function upstreamNamespace(controlUrl, publicUrl, ns) {
  const control = async (path, init) => {
    const sep = path.includes("?") ? "&" : "?";
    const response = await fetch(`${controlUrl}/_control/${path}${sep}ns=${ns}`, init);
    return response.json();
  };
  // What came before `mark()` (the tool's verification probes) is not the check's.
  const offset = { requests: 0, effects: 0 };
  return {
    ns,
    url: `${publicUrl}/ns/${ns}`,
    script: (...faults) => control("script", { method: "POST", body: JSON.stringify(faults) }),
    /** { requests: [{method, path, key, body, authorization}], effects: [{id, key, body}] } */
    async state() {
      const state = await control("state");
      return {
        requests: state.requests.slice(offset.requests),
        effects: state.effects.slice(offset.effects),
      };
    },
    async mark() {
      const state = await control("state");
      offset.requests = state.requests.length;
      offset.effects = state.effects.length;
    },
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
