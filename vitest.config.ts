import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import { cloudflareTest } from "@cloudflare/vitest-plugin";

/** A workerd project (integration tests through the public API) with the test deployment's bindings. */
function workerd(
  name: string,
  include: string[],
  bindings: Record<string, string>,
  options: Record<string, unknown> = {},
) {
  return {
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            UPSTREAM_URL: inject("upstreamUrl"),
            TOOLGATE_ADMIN_TOKEN: "test-admin-token",
            TOOLGATE_SIGNING_KEY: "test-signing-key",
            TOOLGATE_SECRETS_KEY: "test-secrets-key-0123456789abcdef",
            TOOLGATE_ENV: "development",
            // Hosts for allow-list tests only (never contacted): a default-port host and a pinned port;
            // two IPv6 literals of private IPv4 addresses (127.0.0.1 compatible, 169.254.169.254 by
            // NAT64) that webhooks must refuse even so, and a public one they accept.
            TOOLGATE_UPSTREAM_ALLOWLIST:
              "api.example.test,pinned.example.test:8443,[::7f00:1],[64:ff9b::a9fe:a9fe],[2606:4700:4700::1111]",
            SHOP_API_KEY: "sk_test_shop_secret",
            // /mcp's DNS-rebinding guard: the tests' host name (loopback only by default in development).
            TOOLGATE_MCP_ALLOWED_HOSTS: "toolgate.test",
            TOOLGATE_MODEL_PRICES: JSON.stringify({
              "*": { input_per_mtok: 1000, output_per_mtok: 2000 },
            }),
            DEMO_UPSTREAM_URL: `${inject("upstreamUrl")}/ns/code-tools`,
            // Retention shorter than the 7-day default, so a pending approval (max 7 days) outlives it in tests.
            TOOLGATE_RETENTION_MS: String(2 * 24 * 60 * 60_000),
            // Every recorded operation's spans are pushed here (test/integration/trace.test.ts reads them).
            OTEL_EXPORTER_OTLP_ENDPOINT: `${inject("upstreamUrl")}/ns/otel-collector`,
            OTEL_EXPORTER_OTLP_HEADERS: "x-otel-token=otel-header-secret",
            // The fault soak's seed and size (SOAK_SEED, SOAK_OPS); empty: its defaults.
            SOAK_CONFIG: JSON.stringify(inject("soakConfig")),
            // Tests fire retry alarms minutes before they are due, so a retry budget over the real
            // clock would see each file's retries as one storm (the soak's especially): off here,
            // on (the production default) in the integration-retry-budget project.
            TOOLGATE_RETRY_BUDGET_RATIO: "off",
            // Cloudflare Access (issue 35): a made-up team whose keys the identity tests serve with
            // a fetch spy (test/integration/approver-identity.test.ts); no other test sends a token.
            TOOLGATE_ACCESS_TEAM_DOMAIN: "toolgate-test.cloudflareaccess.com",
            TOOLGATE_ACCESS_AUD: "toolgate-test-aud",
            ...bindings,
          },
        },
      })),
    ],
    test: {
      name,
      include,
      globalSetup: ["./test/support/global-setup.ts"],
      // The pool inlines every dependency, so each test file's fresh workerd imported zod's,
      // hono's and the MCP SDK's hundreds of modules one by one (~1.2 s of its ~5 s import):
      // pre-bundled once per run instead. Only what src/ imports; anything else loads as before.
      deps: { optimizer: { ssr: { enabled: true, include: BUNDLED_DEPS } } },
      ...options,
    },
  };
}

/** The runtime dependencies src/ imports (vitest pre-bundles them for the workerd projects). */
const BUNDLED_DEPS = [
  "hono",
  "hono/jsx",
  "hono/jsx/jsx-dev-runtime",
  "hono/cookie",
  "hono/body-limit",
  "hono/html",
  "zod",
  "ulid",
  "standardwebhooks",
  "@modelcontextprotocol/server",
  "jose",
  "@simplewebauthn/server",
  "@simplewebauthn/server/helpers",
  "oauth4webapi",
];

export default defineConfig({
  test: {
    // Two test files at a time even on 2 cores (vitest's default there is 1): a file mostly waits
    // (its fresh workerd's import, the upstream, alarms), so a second one fills the gaps — the
    // integration project took 346 s with 1 worker, 249 s with 2, on the 2-core CI machine.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        test: { name: "unit", include: ["test/unit/**/*.test.ts"], environment: "node" },
      },
      workerd("integration", ["test/integration/**/*.test.ts"], {}),
      // The test deployment with TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY on, as production should run.
      workerd("integration-require-verified", ["test/integration-require-verified/**/*.test.ts"], {
        TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY: "true",
      }),
      // The test deployment with the retry budget on, as production runs by default. Its budget
      // counts over the real clock (a 10 s window), so its files run last, one at a time, alone.
      workerd(
        "integration-retry-budget",
        ["test/integration-retry-budget/**/*.test.ts"],
        { TOOLGATE_RETRY_BUDGET_RATIO: "" },
        { sequence: { groupOrder: 1 }, maxWorkers: 1 },
      ),
      {
        // One wrangler dev + demo upstream for every file (test/support/e2e-setup.ts), headless
        // Chromium: readiness is waited for (selectors, responses), never slept on.
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          environment: "node",
          globalSetup: ["./test/support/e2e-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
