// Where a webhook may point, as a table: https on the allow-list; private, loopback, link-local and
// metadata literals refused even when allow-listed; loopback http only in development.
import { describe, expect, it } from "vitest";
import { checkWebhookUrl } from "../../src/events/webhook-url.ts";

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
