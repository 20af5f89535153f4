// The manifest wire schema (DESIGN.md "Tools"): the contract for PUT /v1/tools/{name}. Every
// object is strict (an unknown field is refused, never ignored), and a field toolgate does not
// enforce yet is refused as `unsupported_field`. Parsing only: compile.ts makes the ToolSpec.
import { z } from "zod";
import { ApiScope } from "../../http/schemas.ts";
import { QuotaNumbers } from "../../domain/quota/definition.ts";
import { CONTEXT_FIELD } from "../../domain/context-needs.ts";
import { DEFAULT_RETRY } from "../../domain/retry.ts";
import { ATOMIC_AMOUNT } from "../../domain/payment.ts";
import { MAX_KEY_TTL_MS, MIN_KEY_TTL_MS } from "../../domain/retry-late.ts";

const Comparison = z
  .strictObject({
    gt: z.number(),
    gte: z.number(),
    lt: z.number(),
    lte: z.number(),
    eq: z.unknown(),
    in: z.array(z.unknown()),
  })
  .partial();
/**
 * An approver group (issue 35): whoever decides with a key holding one of `scopes`, or whose verified
 * id (Access email, key name) is one of `members`, or — verified by Access — whose token's claim holds
 * one of `claims[name]` or whose email's domain is one of `email_domains`. A route's steps: the group asked, when to remind
 * it and when to escalate past it to the next step's group (never on the last step: nothing to
 * escalate to, and a timer never approves).
 */
const ApproverGroup = z
  .strictObject({
    name: z.string().min(1).max(64),
    // Only a scope a key can hold: any other would be a group nobody could ever be in.
    scopes: z.array(ApiScope).max(16).default([]),
    members: z.array(z.string().min(1).max(256)).max(100).default([]),
    // By attribute (a person Cloudflare Access verified): a claim of the token holding one of the
    // values (`groups`, or a custom claim as `custom.<name>`), or the email's domain.
    claims: z
      .record(
        z.string().regex(/^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64})?$/),
        z.array(z.string().min(1).max(256)).min(1).max(50),
      )
      .refine((c) => Object.keys(c).length <= 8, "at most 8 claims")
      .optional(),
    email_domains: z
      .array(z.string().regex(/^(?=.{1,253}$)([a-z0-9-]{1,63}\.)+[a-z]{2,63}$/i))
      .max(16)
      .optional(),
  })
  .refine(
    (g) =>
      g.scopes.length + g.members.length + Object.keys(g.claims ?? {}).length > 0 ||
      (g.email_domains?.length ?? 0) > 0,
    "a group needs scopes, members, claims or email_domains",
  );
const RouteDelay = z
  .number()
  .int()
  .min(1_000)
  .max(7 * 24 * 60 * 60_000)
  .optional();
const RouteStep = z.strictObject({
  group: ApproverGroup,
  remind_after_ms: RouteDelay,
  escalate_after_ms: RouteDelay,
});
const Approval = z.union([
  z.enum(["always", "never"]),
  z
    .strictObject({
      mode: z.enum(["always", "never"]).optional(),
      when: z.record(z.string(), Comparison).optional(),
      expires_in_ms: z
        .number()
        .int()
        .min(1_000)
        .max(7 * 24 * 60 * 60_000)
        .optional(),
      four_eyes: z.boolean().optional(),
      step_up: z.literal("passkey").optional(),
      quorum: z.number().int().min(1).max(10).optional(),
      route: z.array(RouteStep).min(1).max(5).optional(),
    })
    .refine(
      (a) => a.mode !== undefined || a.when !== undefined,
      "approval needs a mode or a when rule",
    )
    .superRefine(checkRoute),
]);

/** A route is enforced whole or refused: nothing in it may be accepted and then never happen. */
function checkRoute(
  a: {
    quorum?: number;
    route?: z.infer<typeof RouteStep>[];
    four_eyes?: boolean;
    expires_in_ms?: number;
  },
  ctx: z.RefinementCtx,
) {
  const fail = (message: string, path: PropertyKey[]) =>
    ctx.addIssue({ code: "custom", message, path });
  if (a.quorum !== undefined && !a.route)
    fail("quorum counts the votes of a route's groups: name them in approval.route", ["quorum"]);
  if (!a.route) return;
  if ((a as { mode?: string; when?: unknown }).mode === "never" && !(a as { when?: unknown }).when)
    fail("approval never asks: a route would never be used", ["route"]);
  if (a.four_eyes === false)
    fail("a routed approval never counts the proposer's vote: four_eyes cannot be false", [
      "four_eyes",
    ]);
  const expiresMs = a.expires_in_ms ?? 15 * 60_000;
  a.route.forEach((step, i) => {
    const last = i === a.route!.length - 1;
    if (last && step.escalate_after_ms !== undefined)
      fail("the last step has no group to escalate to (it waits for the expiry)", [
        "route",
        i,
        "escalate_after_ms",
      ]);
    if (!last && step.escalate_after_ms === undefined)
      fail("a step before the last needs escalate_after_ms, or the next group is never asked", [
        "route",
        i,
        "escalate_after_ms",
      ]);
    for (const key of ["remind_after_ms", "escalate_after_ms"] as const) {
      const ms = step[key];
      if (ms !== undefined && ms >= expiresMs)
        fail(`${key} must come before the approval expires (${expiresMs} ms)`, ["route", i, key]);
    }
  });
}
const RequestTemplate = z.strictObject({
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
  url: z.string().max(2048),
  headers: z.record(z.string(), z.string()).default({}),
});

const LimitBound = z.union([
  z.number(),
  z.string().regex(CONTEXT_FIELD, "a limit's max and min are a number or context.<field>"),
]);

/** An amount in the asset's atomic units: a decimal integer string (no float ever decides a payment). */
const AtomicAmount = z
  .string()
  .regex(ATOMIC_AMOUNT, "amounts are integers in the asset's atomic units, as strings");

const KeyTtl = z.number().int().min(MIN_KEY_TTL_MS).max(MAX_KEY_TTL_MS).optional();

export const Manifest = z.strictObject({
  name: z
    .string()
    .regex(
      /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/,
      "tool names are 1-64 letters, digits, _ or -, starting with a letter",
    )
    .refine(
      (name) => !name.toLowerCase().startsWith("toolgate_"),
      "names starting with toolgate_ are reserved for built-in tools",
    ),
  description: z.string().min(1).max(4096),
  input_schema: z.record(z.string(), z.unknown()),
  output_schema: z.record(z.string(), z.unknown()).optional(),
  risk: z.enum(["read", "write", "irreversible_write"]),
  request: RequestTemplate,
  // key_ttl_ms: how long the upstream keeps a key (default 24 h): late settlement's window.
  idempotency: z
    .discriminatedUnion("mode", [
      z.strictObject({
        mode: z.literal("header"),
        header: z.string().min(1).default("Idempotency-Key"),
        key_ttl_ms: KeyTtl,
      }),
      z.strictObject({ mode: z.literal("natural"), key_ttl_ms: KeyTtl }),
      z.strictObject({ mode: z.literal("none"), key_ttl_ms: KeyTtl }),
    ])
    .default({ mode: "none" }),
  // settle_ms: how long after an ambiguous attempt's own timeout a 404 still only means "not yet".
  reconcile: RequestTemplate.partial({ method: true })
    .extend({ settle_ms: z.number().int().min(0).max(3_600_000).optional() })
    .optional(),
  /** A read the approver sees before deciding (a quote, a dry run): sent once, when approval is asked. */
  preview: RequestTemplate.extend({ method: z.enum(["GET", "POST"]).default("GET") }).optional(),
  operation_key: z.array(z.string()).default([]),
  operation_scope: z.enum(["run", "tenant"]).default("run"),
  resource: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[^{}]*(\{[a-zA-Z0-9_]+\}[^{}]*)*$/, "resource templates look like order:{order_id}")
    .optional(),
  // Each key a top-level property of input_schema, each value context.<field> (context.ts).
  bind: z
    .record(z.string(), z.string().regex(CONTEXT_FIELD, "bind values look like context.<field>"))
    .default({}),
  requires_scopes: z.array(z.string()).default([]),
  approval: Approval.optional(),
  limits: z
    .record(
      z.string(),
      z
        .strictObject({
          max: LimitBound,
          min: LimitBound,
          enum: z.array(z.unknown()),
        })
        .partial(),
    )
    .default({}),
  /** Windowed limits across runs (issue 21): `sum` of a numeric argument or `count`, per subject. */
  limits_across_runs: z
    .array(
      z.strictObject({
        name: z
          .string()
          .regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/, "limit names are 1-64 letters, digits, _ or -"),
        subject: z
          .string()
          .regex(
            /^(user|tenant|run|context\.[a-zA-Z0-9_]+)$/,
            "subject is user, tenant, run (payment limits) or context.<field>",
          ),
        window: z
          .string()
          .regex(/^[1-9][0-9]{0,6}(s|m|h|d)$/, 'window looks like "24h", "90m", "7d"'),
        sum: z.string().min(1).optional(),
        count: z.literal(true).optional(),
        /** x402 (issue 37): the amount a 402 asks, reserved when it is accepted, before signing. */
        payment: z.literal(true).optional(),
        max: z.number().positive(),
        over: z.enum(["refuse", "approve"]).default("refuse"),
      }),
    )
    .max(8)
    .default([]),
  /**
   * Quota shaping (issue 34): each user's first attempts of this tool wait for a slot (a token
   * bucket and/or a concurrency cap), as a PUT /v1/quotas with `scope: { tool }` would; the two
   * may not contradict (quota_conflict).
   */
  quota: QuotaNumbers.optional(),
  /**
   * Acting as the user (issue 36): the run's end user's token from this tenant OAuth provider,
   * sent where a header template says `{credential}` (auth.ts checks both go together).
   */
  auth: z
    .strictObject({
      oauth: z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "auth.oauth names an OAuth provider"),
      scopes: z.array(z.string().min(1).max(256)).max(64).default([]),
    })
    .optional(),
  timeout_ms: z.number().int().min(1).max(120_000).default(10_000),
  max_attempts: z.number().int().min(1).max(20).default(DEFAULT_RETRY.maxAttempts),
  retry: z
    .strictObject({
      min_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.minDelayMs),
      initial_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.initialDelayMs),
      max_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxDelayMs),
      max_elapsed_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxElapsedMs),
    })
    .default({
      min_delay_ms: DEFAULT_RETRY.minDelayMs,
      initial_delay_ms: DEFAULT_RETRY.initialDelayMs,
      max_delay_ms: DEFAULT_RETRY.maxDelayMs,
      max_elapsed_ms: DEFAULT_RETRY.maxElapsedMs,
    }),
  cost: z.number().min(0).default(1),
  /** JSON Pointers (RFC 6901) hidden from traces, logs, the console, the inbox and exports. */
  redact: z.array(z.string().max(512)).max(64).default([]),
  /** Where a shadow run's write goes instead (writes only): another origin, or a fixed answer. */
  sandbox: z
    .union([
      z.strictObject({ base_url: z.string().max(2048) }),
      z.strictObject({ result: z.unknown() }),
    ])
    .optional(),
  /**
   * Undo (issue 22): the write that reverses this one, as a call of another registered write tool
   * whose arguments are templates over this call's frozen input and recorded result (compensate.ts).
   */
  compensate: z
    .strictObject({
      tool: z.string().regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/, "compensate.tool names a tool"),
      arguments: z.record(z.string(), z.unknown()).default({}),
      approval: z.enum(["required", "none"]).default("required"),
    })
    .optional(),
  /**
   * x402 pay-once (issue 37): what a 402 may be paid, in the asset's atomic units (payment.ts). The
   * tenant's signer webhook signs the one payload; `secret` names the tenant secret (whsec_…) the
   * request to it is signed with, per Standard Webhooks.
   */
  payment: z
    .strictObject({
      protocol: z.literal("x402"),
      max_amount: AtomicAmount,
      asset: z.string().min(1).max(256),
      network: z.string().min(3).max(100).optional(),
      pay_to: z.string().min(1).max(256).optional(),
      approval_over: AtomicAmount.optional(),
      signer: z.strictObject({
        url: z.string().max(2048),
        secret: z.string().regex(/^[A-Za-z0-9_]+$/, "signer.secret names a tenant secret"),
      }),
    })
    .optional(),
  /** Opt-in: the (redacted) arguments and result in the trace and its OTLP export (gen_ai.tool.call.*). */
  trace: z
    .strictObject({ arguments: z.boolean().default(false), result: z.boolean().default(false) })
    .default({ arguments: false, result: false }),
});
export type Manifest = z.infer<typeof Manifest>;

export type ManifestError =
  | { code: "invalid_manifest"; detail: string }
  | { code: "upstream_not_allowed"; detail: string }
  | { code: "unsupported_field"; detail: string }
  | { code: "invalid_pointer"; detail: string }
  /** A `compensate` that cannot run as declared (PUT: checked against the compensating tool). */
  | { code: "invalid_compensation"; detail: string };

/**
 * Hosts tools may target: the deployment allow-list — `host`, `*.suffix`, either with `:port` to
 * pin a port (without one, only the scheme's default port) — plus loopback on any port in development.
 */
export type HostPolicy = { allowlist: string[]; allowLoopback: boolean };
