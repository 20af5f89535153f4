// Where a webhook may point, as a table: https on the allow-list; private, loopback, link-local and
// metadata literals refused even when allow-listed; loopback http only in development.
import { describe, expect, it } from "vitest";
import { checkWebhookUrl, isPrivateAddress } from "../../src/events/webhook-url.ts";

const prod = {
  allowlist: ["hooks.example.com", "*.slack.test", "10.0.0.1", "169.254.169.254"],
  allowLoopback: false,
};
const dev = { ...prod, allowLoopback: true };

describe("checkWebhookUrl", () => {
  it.each([
    ["https://hooks.example.com/in", prod, true],
    ["https://x.slack.test/services/T/B/C", prod, true],
    ["http://hooks.example.com/in", prod, false],
    ["https://hooks.example.com:8443/in", prod, false],
    ["https://evil.example.org/in", prod, false],
    ["https://user:pw@hooks.example.com/in", prod, false],
    ["http://10.0.0.1/in", prod, false],
    ["https://10.0.0.1/in", prod, false],
    ["https://169.254.169.254/latest/meta-data", prod, false],
    ["https://172.16.3.4/", { ...prod, allowlist: ["172.16.3.4"] }, false],
    ["https://192.168.1.1/", { ...prod, allowlist: ["192.168.1.1"] }, false],
    ["https://0x7f.1/", { ...prod, allowlist: ["127.0.0.1"] }, false],
    ["https://[::1]/", { ...prod, allowlist: ["[::1]"] }, false],
    ["https://[fd00::1]/", { ...prod, allowlist: ["[fd00::1]"] }, false],
    ["https://[fe80::1]/", { ...prod, allowlist: ["[fe80::1]"] }, false],
    ["https://[::ffff:a9fe:a9fe]/", { ...prod, allowlist: ["[::ffff:a9fe:a9fe]"] }, false],
    ["http://127.0.0.1:8787/hook", prod, false],
    ["http://127.0.0.1:8787/hook", dev, true],
    ["http://10.0.0.1/in", dev, false],
    ["ftp://hooks.example.com/", prod, false],
    ["not a url", prod, false],
  ] as const)("%s → accepted: %s", (url, hosts, accepted) => {
    const checked = checkWebhookUrl(url, {
      allowlist: [...hosts.allowlist],
      allowLoopback: hosts.allowLoopback,
    });
    expect(checked.ok).toBe(accepted);
    if (!checked.ok) expect(checked.error.code).toBe("webhook_url_not_allowed");
  });
});

// Audit 2026-12-05 N6: every IPv6 spelling of a private IPv4 address, and the IPv6 ranges of their
// own, as the URL parser hands them over and as written.
describe("isPrivateAddress: IPv6 literals", () => {
  it.each([
    // IPv4-compatible (deprecated ::/96): ::7f00:1 is 127.0.0.1, ::a00:1 is 10.0.0.1
    ["[::7f00:1]", true],
    ["[::a00:1]", true],
    ["[::127.0.0.1]", true],
    ["[::8.8.8.8]", true],
    // IPv4-mapped ::ffff:0:0/96
    ["[::ffff:7f00:1]", true],
    ["[::ffff:127.0.0.1]", true],
    ["[::FFFF:A9FE:A9FE]", true],
    ["[0:0:0:0:0:ffff:a00:1]", true],
    ["[::ffff:c0a8:101]", true],
    ["[::ffff:808:808]", false],
    ["[::ffff:8.8.8.8]", false],
    // IPv4-translated ::ffff:0:0:0/96
    ["[::ffff:0:7f00:1]", true],
    ["[::ffff:0:127.0.0.1]", true],
    ["[::ffff:0:808:808]", false],
    // NAT64: the well-known prefix by its IPv4, the local-use /48 always
    ["[64:ff9b::a9fe:a9fe]", true],
    ["[64:ff9b::169.254.169.254]", true],
    ["[64:ff9b::7f00:1]", true],
    ["[64:ff9b::808:808]", false],
    ["[64:ff9b:1::808:808]", true],
    ["[64:ff9b:1:ffff::1]", true],
    // 6to4 2002::/16 embeds the IPv4 in groups 2-3
    ["[2002:7f00:1::]", true],
    ["[2002:a9fe:a9fe::1]", true],
    ["[2002:808:808::1]", false],
    // Teredo: the client's IPv4, inverted, in the last two groups (~127.0.0.1 = 80ff:fffe)
    ["[2001:0:4136:e378:8000:63bf:80ff:fffe]", true],
    ["[2001:0:4136:e378:8000:63bf:f7f7:f7f7]", false],
    // ranges of their own
    ["[::]", true],
    ["[::1]", true],
    ["[0:0:0:0:0:0:0:1]", true],
    ["[fe80::1]", true],
    ["[febf::1]", true],
    ["[fec0::1]", true],
    ["[fc00::1]", true],
    ["[fd12:3456::1]", true],
    ["[ff02::1]", true],
    ["[ff05::1:3]", true],
    // public
    ["[2606:4700:4700::1111]", false],
    ["[2001:db8::1]", false],
    ["2606:4700:4700::1111", false],
    // not an IPv6 address at all: refused, never waved through
    ["[1:2:3:4:5:6:7:8:9]", true],
    ["[1::2::3]", true],
    ["[::ffff:300.0.0.1]", true],
    ["[:1]", true],
    ["[12345::]", true],
  ] as const)("%s → private: %s", (host, expected) => {
    expect(isPrivateAddress(host)).toBe(expected);
  });

  it.each([
    ["127.0.0.1", true],
    ["0.0.0.0", true],
    ["100.64.0.1", true],
    ["192.0.0.8", true],
    ["198.18.0.1", true],
    ["224.0.0.1", true],
    ["255.255.255.255", true],
    ["8.8.8.8", false],
    ["172.32.0.1", false],
    ["localhost", true],
    ["localhost.", true],
    ["api.localhost", true],
    ["hooks.example.com", false],
  ] as const)("%s → private: %s", (host, expected) => {
    expect(isPrivateAddress(host)).toBe(expected);
  });

  it.each([
    "https://[::7f00:1]/",
    "https://[::a00:1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:0:7f00:1]/",
    "https://[64:ff9b::a9fe:a9fe]/",
    "https://[64:ff9b::169.254.169.254]/",
    "https://[64:ff9b:1::a]/",
    "https://[2002:7f00:1::]/",
    "https://[::]/",
    "https://[ff02::1]/",
  ])("%s is refused even when allow-listed", (raw) => {
    const host = new URL(raw).hostname;
    const checked = checkWebhookUrl(raw, { allowlist: [host], allowLoopback: false });
    expect(checked).toMatchObject({ ok: false, error: { code: "webhook_url_not_allowed" } });
    expect(checkWebhookUrl(raw, { allowlist: [host], allowLoopback: true }).ok).toBe(false);
  });
});
