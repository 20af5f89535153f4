// Small Web Crypto helpers shared by the edge (tokens) and the tenant object (API keys).
export const base64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

const importedKeys = new Map<string, Promise<CryptoKey>>();

export async function hmac(key: string, payload: string): Promise<string> {
  let cryptoKey = importedKeys.get(key);
  if (!cryptoKey) {
    cryptoKey = crypto.subtle.importKey("raw", new TextEncoder().encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    importedKeys.set(key, cryptoKey);
  }
  return base64url(new Uint8Array(await crypto.subtle.sign("HMAC", await cryptoKey, new TextEncoder().encode(payload))));
}

/** Compares digests, so timing reveals nothing about either value (timingSafeEqual needs equal lengths). */
export async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const [da, db] = await Promise.all([a, b].map((s) => crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))));
  return crypto.subtle.timingSafeEqual(da!, db!);
}

export function randomSecret(bytes = 24): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}
