// Where a webhook may point: the same rules as a tool's URL (tools/manifest/url.ts). https only, the
// host (and port) on TOOLGATE_UPSTREAM_ALLOWLIST, no credentials in the URL, and never an IP literal
// in a private, loopback, link-local or metadata range — even if allow-listed, so a careless `*.x`
// entry cannot reach 169.254.169.254. Plain http to loopback only in development (its receivers).
// Redirects are never followed when sending (events/deliver.ts), so the checked host is the one hit.
import { err, ok, type Result } from "../domain/result.ts";
import { allows, isLoopback } from "../tools/manifest/url.ts";
import type { HostPolicy } from "../tools/manifest/schema.ts";

export type WebhookUrlError = { code: "webhook_url_not_allowed"; detail: string };

export function checkWebhookUrl(raw: string, hosts: HostPolicy): Result<string, WebhookUrlError> {
  const refuse = (detail: string) => err({ code: "webhook_url_not_allowed" as const, detail });
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse(`not an absolute URL: ${raw}`);
  }
  if (url.username || url.password) return refuse("credentials in the URL are not accepted");
  const host = url.hostname;
  const devLoopback = hosts.allowLoopback && isLoopback(host);
  if (url.protocol !== "https:" && !(url.protocol === "http:" && devLoopback))
    return refuse(
      `webhooks are sent over https only (plain http to loopback only with TOOLGATE_ENV=development): ${url.protocol}//${url.host}`,
    );
  if (!devLoopback && isPrivateAddress(host))
    return refuse(`${host} is a private, loopback, link-local or metadata address`);
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  if (!devLoopback && !hosts.allowlist.some((entry) => allows(entry, host, port, url.protocol)))
    return refuse(`${host}:${port} is not on TOOLGATE_UPSTREAM_ALLOWLIST`);
  return ok(url.toString());
}

/**
 * IP literals in ranges no webhook may reach (the URL parser has already normalised 0x7f.1,
 * 2130706433 and friends to dotted quads): 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12,
 * 192.168/16; ::, ::1, fc00::/7, fe80::/10, and IPv4-mapped forms of the IPv4 ranges.
 */
export function isPrivateAddress(hostname: string): boolean {
  if (hostname === "localhost" || hostname.endsWith(".localhost")) return true;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(hostname);
  if (v4) return privateV4(v4.slice(1, 5).map(Number) as [number, number, number, number]);
  if (!hostname.startsWith("[")) return false;
  const v6 = hostname.slice(1, -1).toLowerCase();
  if (v6 === "::" || v6 === "::1") return true;
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (mapped) {
    const [hi, lo] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
    return privateV4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
  }
  const first = parseInt(v6.split(":")[0] || "0", 16);
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80;
}

function privateV4([a, b]: [number, number, number, number] | number[]): boolean {
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 100 && b! >= 64 && b! < 128) ||
    (a === 169 && b === 254) ||
    (a === 172 && b! >= 16 && b! < 32) ||
    (a === 192 && b === 168)
  );
}
