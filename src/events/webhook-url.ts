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
 * Host names and IP literals no webhook may reach, even when allow-listed: `localhost` names; the
 * IPv4 ranges that are not globally reachable (privateV4); and IPv6 literals parsed in full (`::`
 * expanded, an embedded dotted quad read as two groups): unspecified, loopback and the whole
 * deprecated IPv4-compatible ::/96, link-local fe80::/10, site-local fec0::/10, ULA fc00::/7,
 * multicast ff00::/8, NAT64 64:ff9b::/32 outside the well-known /96 (local-use 64:ff9b:1::/48), and every form that embeds an IPv4 address
 * whose address is private: mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96,
 * 6to4 2002::/16 and Teredo 2001::/32 (its client address). Anything with a colon that is not a
 * valid IPv6 address is refused too (fail closed). The URL parser has already normalised 0x7f.1,
 * 2130706433 and friends to dotted quads, and [::ffff:127.0.0.1] to [::ffff:7f00:1].
 */
export function isPrivateAddress(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const v4 = ipv4Bytes(host);
  if (v4) return privateV4(v4);
  if (!host.includes(":")) return false;
  const g = ipv6Groups(host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host);
  if (!g) return true;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const embedded = (hi: number, lo: number) => privateV4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
  if (zeros(0, 6)) return true; // ::, ::1, IPv4-compatible ::a.b.c.d (deprecated, RFC 4291)
  if ((g[0]! & 0xfe00) === 0xfc00 || (g[0]! & 0xffc0) === 0xfe80) return true; // ULA, link-local
  if ((g[0]! & 0xffc0) === 0xfec0 || (g[0]! & 0xff00) === 0xff00) return true; // site-local, multicast
  if (zeros(0, 5) && g[5] === 0xffff) return embedded(g[6]!, g[7]!); // mapped
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return embedded(g[6]!, g[7]!); // translated
  // NAT64: the well-known 64:ff9b::/96 by its IPv4; the rest of 64:ff9b::/32 (local-use
  // 64:ff9b:1::/48, RFC 8215, and unassigned space) embeds it where only its operator knows.
  if (g[0] === 0x64 && g[1] === 0xff9b) return !zeros(2, 6) || embedded(g[6]!, g[7]!);
  if (g[0] === 0x2002) return embedded(g[1]!, g[2]!); // 6to4
  if (g[0] === 0x2001 && g[1] === 0) return embedded(g[6]! ^ 0xffff, g[7]! ^ 0xffff); // Teredo
  return false;
}

function ipv4Bytes(text: string): number[] | null {
  const quad = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  const bytes = quad?.slice(1, 5).map(Number);
  return bytes && bytes.every((b) => b <= 255) ? bytes : null;
}

/** The eight 16-bit groups of an IPv6 address (no brackets), or null if it is not one. */
function ipv6Groups(text: string): number[] | null {
  // A trailing dotted quad (::ffff:127.0.0.1) is the last two groups.
  const quad = /^(.*:)([^:]*\.[^:]*)$/.exec(text);
  let hex = text;
  if (quad) {
    const bytes = ipv4Bytes(quad[2]!);
    if (!bytes) return null;
    hex = `${quad[1]}${((bytes[0]! << 8) | bytes[1]!).toString(16)}:${((bytes[2]! << 8) | bytes[3]!).toString(16)}`;
  }
  const halves = hex.split("::");
  if (halves.length > 2) return null;
  const groups = halves.map((half) => (half === "" ? [] : half.split(":")));
  if (groups.flat().some((group) => !/^[0-9a-f]{1,4}$/.test(group))) return null;
  const [head, tail] = groups.map((half) => half.map((group) => parseInt(group, 16)));
  if (tail === undefined) return head!.length === 8 ? head! : null;
  const fill = 8 - head!.length - tail.length;
  return fill >= 1 ? [...head!, ...new Array<number>(fill).fill(0), ...tail] : null;
}

/**
 * IPv4 ranges that are not globally reachable (IANA special-purpose registry): 0/8, 10/8,
 * 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.168/16, 198.18/15, multicast 224/4,
 * reserved 240/4 and broadcast.
 */
function privateV4([a, b, c]: number[]): boolean {
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 100 && b! >= 64 && b! < 128) ||
    (a === 169 && b === 254) ||
    (a === 172 && b! >= 16 && b! < 32) ||
    (a === 192 && b === 0 && c === 0) ||
    (a === 192 && b === 168) ||
    (a === 198 && (b === 18 || b === 19)) ||
    a! >= 224
  );
}
