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
