// TOOLGATE_CONSOLE_URL: the one origin every link toolgate makes starts with (GET /, a webhook's
// console_url and so its Slack buttons, a run's notify endpoint); unset or malformed, the request's.
import { describe, expect, it, vi } from "vitest";
import { consoleOrigin } from "../../src/config.ts";

describe("consoleOrigin", () => {
  it.each([
    [undefined, "http://127.0.0.1:8787"],
    ["", "http://127.0.0.1:8787"],
    ["https://toolgate.example.com", "https://toolgate.example.com"],
    ["https://toolgate.example.com/console/", "https://toolgate.example.com"],
    ["http://localhost:8787", "http://localhost:8787"],
  ])("TOOLGATE_CONSOLE_URL=%j → %s", (value, origin) => {
    expect(
      consoleOrigin({ TOOLGATE_CONSOLE_URL: value }, "http://127.0.0.1:8787/v1/webhooks/x"),
    ).toBe(origin);
  });

  it.each(["toolgate.example.com", "javascript:alert(1)", "ftp://x.example.com"])(
    "%s is not an http(s) origin: the request's, and the deployment error is logged",
    (value) => {
      const log = vi.spyOn(console, "error").mockImplementation(() => {});
      expect(consoleOrigin({ TOOLGATE_CONSOLE_URL: value }, "https://a.example.com/v1/x")).toBe(
        "https://a.example.com",
      );
      expect(log.mock.calls[0]![0]).toContain("toolgate.misconfigured");
      log.mockRestore();
    },
  );
});
