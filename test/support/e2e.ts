// What an e2e file uses of the shared server (test/support/e2e-setup.ts): toolgate's URL, and its
// own namespace of the shared demo upstream (faults, requests and effects are kept per namespace).
import { inject } from "vitest";

export type ShopState = {
  requests: Array<{ method: string; path: string; key: string | null; body: any }>;
  effects: Array<{ path: string; body: any; key: string | null }>;
};

/** The shared `wrangler dev` and demo upstream; `base` is toolgate as a browser reaches it. */
export function e2eServer() {
  const server = inject("e2e");
  // `localhost` is a secure context, so the console's Secure cookies are kept over http.
  return { ...server, base: `http://localhost:${server.port}` };
}

/** One namespace of the shared demo upstream: `url` is the shop's base URL for the demo tools. */
export function shopNamespace(name: string) {
  const { upstreamUrl } = inject("e2e");
  const control = (path: string, init?: RequestInit) =>
    fetch(`${upstreamUrl}/_control/${path}${path.includes("?") ? "&" : "?"}ns=${name}`, init);
  return {
    name,
    url: `${upstreamUrl}/ns/${name}`,
    state: async () => (await (await control("state")).json()) as ShopState,
    /** Queues faults for the namespace's next requests, in order. */
    script: async (...faults: unknown[]) => {
      await control("script", { method: "POST", body: JSON.stringify(faults) });
    },
    /** Resolves once the namespace has seen `count` requests (the upstream caps the wait at 10 s). */
    waitForRequests: async (count: number) => {
      await control(`wait?requests=${count}`);
    },
  };
}

/**
 * `read()` again until `done` holds, for what the tenant index shows (fed by the event queue within
 * seconds): bounded, 150 reads 200 ms apart, then a failure naming `what` and the last value read.
 */
export async function indexUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  what: string,
): Promise<T> {
  let value = await read();
  for (let i = 0; i < 150 && !done(value); i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    value = await read();
  }
  if (!done(value)) throw new Error(`the index never showed ${what}: ${JSON.stringify(value)}`);
  return value;
}
