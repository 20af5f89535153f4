// A made-up Cloudflare Access team for tests (issue 35): its RS256 key, its certs endpoint served by a
// fetch spy (the test deployment's team and AUD are set in vitest.config.ts), and tokens it signs
// with any claims — shared by the approver-identity and approver-group tests.
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { afterEach, beforeAll, beforeEach, vi } from "vitest";

export const TEAM = "https://toolgate-test.cloudflareaccess.com";
export const AUD = "toolgate-test-aud";
export const ACCESS = "Cf-Access-Jwt-Assertion";
const CERTS = `${TEAM}/cdn-cgi/access/certs`;

export type Claims = {
  aud?: string;
  iss?: string;
  exp?: number;
  email?: string;
  sub?: string;
  /** Any other claim the token carries (`groups`, `custom`, …). */
  extra?: Record<string, unknown>;
};

async function keyPair(): Promise<{ privateKey: CryptoKey; publicKey: JWK }> {
  const pair = await generateKeyPair("RS256", { extractable: true });
  return { privateKey: pair.privateKey, publicKey: await exportJWK(pair.publicKey) };
}

/** Registers the team's hooks in the calling test file; its keys exist once `beforeAll` ran. */
export function accessTeam() {
  const team = { key: null as CryptoKey | null, rogue: null as CryptoKey | null, fetched: 0 };
  let published: JWK;
  beforeAll(async () => {
    const own = await keyPair();
    team.key = own.privateKey;
    team.rogue = (await keyPair()).privateKey;
    published = { ...own.publicKey, kid: "team-1", alg: "RS256", use: "sig" };
  });
  // The team's certs endpoint, as Cloudflare serves it; everything else goes to the real network.
  beforeEach(() => {
    const real = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url !== CERTS) return real(input, init);
      team.fetched += 1;
      return Response.json({ keys: [published] });
    });
  });
  afterEach(() => void vi.restoreAllMocks());
  return {
    certsFetched: () => team.fetched,
    rogueKey: () => team.rogue!,
    /** A token of the team (or signed by `key` under `kid`), alice's unless `over` says. */
    token: async (over: Claims = {}, key?: CryptoKey, kid = "team-1"): Promise<string> => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ email: over.email ?? "alice@example.com", type: "app", ...over.extra })
        .setProtectedHeader({ alg: "RS256", kid })
        .setIssuer(over.iss ?? TEAM)
        .setAudience(over.aud ?? AUD)
        .setSubject(over.sub ?? "7335d417-61da-459d-899c-0a01c76a2f94")
        .setIssuedAt(now - 60)
        .setExpirationTime(over.exp ?? now + 300)
        .sign(key ?? team.key!);
    },
  };
}
