// The URL builder and the allow-list, as tables: no argument can change scheme, host, port or the
// template's static path prefix; "", "." and ".." are refused in path placeholders; everything
// else is percent-encoded, never interpreted.
import { describe, expect, it } from "vitest";
import { compileManifest } from "../../src/tools/manifest/compile.ts";
import type { HostPolicy } from "../../src/tools/manifest/schema.ts";
import { buildUrl } from "../../src/tools/manifest/url.ts";

describe("buildUrl", () => {
  const T = "https://shop.example.com/customers/{customer_id}/{kind}/{id}?expand={expand}";
  it.each([
    [
      "plain values",
      { customer_id: "cus_1", kind: "orders", id: "o1", expand: "items" },
      "https://shop.example.com/customers/cus_1/orders/o1?expand=items",
    ],
    ["'..' in the path", { customer_id: "cus_1", kind: "..", id: "..", expand: "" }, null],
    ["'.' in the path", { customer_id: "cus_1", kind: ".", id: "x", expand: "" }, null],
    ["'' in the path", { customer_id: "cus_1", kind: "orders", id: "", expand: "" }, null],
    ["absent path value", { customer_id: "cus_1", kind: "orders", expand: "" }, null],
    [
      "'..' in the query is only a value",
      { customer_id: "c", kind: "k", id: "i", expand: ".." },
      "https://shop.example.com/customers/c/k/i?expand=..",
    ],
    [
      "encoded dots stay encoded",
      { customer_id: "c", kind: "%2e%2e", id: "%2E.", expand: "" },
      "https://shop.example.com/customers/c/%252e%252e/%252E.?expand=",
    ],
    [
      "slashes and traversal inside a value",
      { customer_id: "c", kind: "a/../../admin", id: "i", expand: "" },
      "https://shop.example.com/customers/c/a%2F..%2F..%2Fadmin/i?expand=",
    ],
    [
      "query and fragment injection",
      { customer_id: "c?admin=1#x", kind: "k", id: "i", expand: "a&b=c" },
      "https://shop.example.com/customers/c%3Fadmin%3D1%23x/k/i?expand=a%26b%3Dc",
    ],
    [
      "backslash (a path separator to WHATWG URL)",
      { customer_id: "..\\..", kind: "k", id: "i", expand: "" },
      "https://shop.example.com/customers/..%5C../k/i?expand=",
    ],
    [
      "numbers are JSON",
      { customer_id: 42, kind: "k", id: true, expand: 1.5 },
      "https://shop.example.com/customers/42/k/true?expand=1.5",
    ],
  ] as const)("%s", (_what, input, expected) => {
    const built = buildUrl(T, input as Record<string, unknown>, "tg_key");
    expect(built.ok ? built.value : null).toBe(expected);
  });

  it("names the field it refuses", () => {
    const built = buildUrl(T, { customer_id: "c", kind: "..", id: "i" }, "k");
    expect(!built.ok && built.error).toContain("kind");
  });

  it("keeps the static prefix even when it ends mid-segment", () => {
    const built = buildUrl("https://h.example.com/api/v1/ord-{id}", { id: "7" }, "k");
    expect(built.ok && built.value).toBe("https://h.example.com/api/v1/ord-7");
    expect(buildUrl("https://h.example.com/api/v1/{id}", { id: ".." }, "k").ok).toBe(false);
  });
});

describe("allow-list and transport at registration", () => {
  const hosts: HostPolicy = {
    allowlist: ["api.example.com", "*.shop.example.com", "pinned.example.com:8443"],
    allowLoopback: false,
  };
  const compile = (url: string, headers: Record<string, string> = {}, policy = hosts) =>
    compileManifest(
      {
        name: "t",
        description: "d",
        input_schema: { type: "object" },
        risk: "read",
        request: { method: "GET", url, headers },
      },
      policy,
    );
  const code = (r: ReturnType<typeof compile>) => (r.ok ? "ok" : r.error.code);
  it.each([
    ["exact host, default port", "https://api.example.com/x", "ok"],
    ["exact host, explicit default port", "https://api.example.com:443/x", "ok"],
    ["exact host, other port", "https://api.example.com:8443/x", "upstream_not_allowed"],
    ["suffix", "https://eu.shop.example.com/x", "ok"],
    [
      "suffix does not match the bare domain's lookalike",
      "https://evilshop.example.com/x",
      "upstream_not_allowed",
    ],
    ["pinned port", "https://pinned.example.com:8443/x", "ok"],
    ["pinned host on its default port", "https://pinned.example.com/x", "upstream_not_allowed"],
    ["placeholder in host", "https://{host}.example.com/x", "invalid_manifest"],
    ["userinfo trick", "https://api.example.com@evil.com/x", "upstream_not_allowed"],
    ["loopback outside development", "http://127.0.0.1:8788/x", "upstream_not_allowed"],
    ["not http(s)", "file:///etc/passwd", "invalid_manifest"],
  ] as const)("%s", (_what, url, expected) => {
    expect(code(compile(url))).toBe(expected);
  });

  it("secrets only over https (plain http only to loopback in development), in headers only", () => {
    const secret = { Authorization: "Bearer {secret:KEY}" };
    expect(
      code(
        compile("http://api.example.com/x", secret, { ...hosts, allowlist: ["api.example.com"] }),
      ),
    ).toBe("invalid_manifest");
    expect(code(compile("https://api.example.com/x", secret))).toBe("ok");
    expect(
      code(compile("http://127.0.0.1:8788/x", secret, { allowlist: [], allowLoopback: true })),
    ).toBe("ok");
    expect(code(compile("https://api.example.com/x?k={secret:KEY}"))).toBe("invalid_manifest");
    expect(code(compile("https://api.example.com/x", { Authorization: "{secret:bad-name}" }))).toBe(
      "invalid_manifest",
    );
    const compiled = compile("https://api.example.com/x", {
      Authorization: "Bearer {secret:KEY}",
      "X-Other": "{secret:OTHER}",
    });
    expect(compiled.ok && compiled.value.secretNames).toEqual(["KEY", "OTHER"]);
  });
});
