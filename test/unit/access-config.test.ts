// TOOLGATE_ACCESS_TEAM_DOMAIN + TOOLGATE_ACCESS_AUD (issue 35): both or neither; the team domain is
// an https origin (a bare host name reads as one), loopback http in development only. A half or a
// wrong setting is `misconfigured` (a decision then fails closed), never Access silently off.
import { describe, expect, it } from "vitest";
import { accessConfig } from "../../src/config.ts";

describe("accessConfig", () => {
  it.each([
    ["neither: no Access", {}, null],
    [
      "a bare team host",
      { TOOLGATE_ACCESS_TEAM_DOMAIN: "acme.cloudflareaccess.com", TOOLGATE_ACCESS_AUD: "aud1" },
      {
        issuer: "https://acme.cloudflareaccess.com",
        jwksUrl: "https://acme.cloudflareaccess.com/cdn-cgi/access/certs",
        audience: "aud1",
      },
    ],
    [
      "an https URL with a trailing slash",
      {
        TOOLGATE_ACCESS_TEAM_DOMAIN: "https://acme.cloudflareaccess.com/",
        TOOLGATE_ACCESS_AUD: "a",
      },
      {
        issuer: "https://acme.cloudflareaccess.com",
        jwksUrl: "https://acme.cloudflareaccess.com/cdn-cgi/access/certs",
        audience: "a",
      },
    ],
    [
      "loopback http in development",
      {
        TOOLGATE_ENV: "development",
        TOOLGATE_ACCESS_TEAM_DOMAIN: "http://127.0.0.1:8788",
        TOOLGATE_ACCESS_AUD: "a",
      },
      {
        issuer: "http://127.0.0.1:8788",
        jwksUrl: "http://127.0.0.1:8788/cdn-cgi/access/certs",
        audience: "a",
      },
    ],
  ] as const)("%s", (_what, vars, expected) => {
    expect(accessConfig(vars)).toEqual({ ok: true, value: expected });
  });

  it.each([
    ["only the team domain", { TOOLGATE_ACCESS_TEAM_DOMAIN: "acme.cloudflareaccess.com" }],
    ["only the audience", { TOOLGATE_ACCESS_AUD: "aud1" }],
    [
      "plain http in production",
      { TOOLGATE_ACCESS_TEAM_DOMAIN: "http://acme.example", TOOLGATE_ACCESS_AUD: "a" },
    ],
    [
      "loopback http in production",
      { TOOLGATE_ACCESS_TEAM_DOMAIN: "http://127.0.0.1:8788", TOOLGATE_ACCESS_AUD: "a" },
    ],
    ["not a URL", { TOOLGATE_ACCESS_TEAM_DOMAIN: "https://", TOOLGATE_ACCESS_AUD: "a" }],
  ] as const)("%s → misconfigured", (_what, vars) => {
    const config = accessConfig(vars);
    expect(!config.ok && config.error.code).toBe("misconfigured");
  });
});
