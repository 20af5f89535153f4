// The client's one HTTP path: JSON over fetch, problem+json turned into ToolgateProblem, and a
// bounded resend after a network error or a gateway 502/503/504. Resending is safe only because
// every request the client sends is idempotent on the server: a turn is identified by its call
// ids and content (src/domain/turn/turn.ts: same ids + same content → the same turn, never a second
// one); createRun carries a request_id, so a resend returns the run the first send created; a
// decision is taken once; reads change nothing. A new non-idempotent request must not use this
// path without such a key. When toolgate stays unreachable, ToolgateUnreachable carries the only
// honest thing to tell a model: it is not known whether the call was carried out.

export type Transport = {
  baseUrl: string;
  token: string;
  fetch?: typeof fetch;
  /** Tries per request after a network error or 502/503/504 (default 4), backoff 250 ms × 2ⁿ up to 2 s. */
  attempts?: number;
};

/** A request toolgate refused (HTTP 4xx/5xx problem+json with a stable `code`). */
export class ToolgateProblem extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  constructor(status: number, code: string, detail: string) {
    super(`toolgate answered ${status} ${code}: ${detail}`);
    this.name = "ToolgateProblem";
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** What a model is told when toolgate cannot be reached: never "try again" for a write of unknown outcome. */
export const UNREACHABLE_TEXT =
  "toolgate, which carries out this tool, could not be reached, so it is not known whether this call was carried out. Do not call it again; tell the user it could not be confirmed and will be checked.";

export class ToolgateUnreachable extends Error {
  readonly modelText = UNREACHABLE_TEXT;
  constructor(cause: unknown) {
    super(`toolgate could not be reached: ${String(cause)}`, { cause });
    this.name = "ToolgateUnreachable";
  }
}

const RESEND_STATUSES = new Set([502, 503, 504]);

export async function request<T>(
  transport: Transport,
  method: string,
  path: string,
  body?: unknown,
  options: { preferWaitS?: number; timeoutMs?: number } = {},
): Promise<{ status: number; body: T }> {
  const attempts = transport.attempts ?? 4;
  const doFetch = transport.fetch ?? fetch;
  let lastError: unknown = null;
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) await delay(Math.min(2000, 250 * 2 ** (attempt - 1)));
    const headers: Record<string, string> = { Authorization: `Bearer ${transport.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (options.preferWaitS !== undefined) headers.Prefer = `wait=${options.preferWaitS}`;
    let response: Response;
    try {
      response = await doFetch(new URL(path, transport.baseUrl), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
      });
    } catch (error) {
      lastError = error;
      continue;
    }
    const text = await response.text().catch((error: unknown) => {
      lastError = error;
      return null;
    });
    if (text === null) continue;
    if (RESEND_STATUSES.has(response.status)) {
      lastError = new Error(`HTTP ${response.status}`);
      continue;
    }
    const parsed = text ? (JSON.parse(text) as unknown) : null;
    if (!response.ok) {
      const problem = (parsed ?? {}) as { code?: string; detail?: string };
      throw new ToolgateProblem(response.status, problem.code ?? "error", problem.detail ?? text);
    }
    return { status: response.status, body: parsed as T };
  }
  throw new ToolgateUnreachable(lastError);
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
