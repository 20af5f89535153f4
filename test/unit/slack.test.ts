// The Slack format against Block Kit's structure (https://api.slack.com/reference/block-kit):
// section / context / actions blocks, text objects of type mrkdwn or plain_text within Slack's
// limits, a button with a url to the exact console page; user text escaped; every event type renders.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { EVENT_TYPES, type ToolgateEvent } from "../../src/domain/journal/events.ts";
import { consoleLink, slackMessage } from "../../src/events/slack.ts";

const Text = (max: number) =>
  z.strictObject({ type: z.enum(["mrkdwn", "plain_text"]), text: z.string().min(1).max(max) });
const Button = z.strictObject({
  type: z.literal("button"),
  text: z.strictObject({ type: z.literal("plain_text"), text: z.string().min(1).max(75) }),
  url: z.url().max(3000),
  style: z.enum(["primary", "danger"]).optional(),
});
const Block = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("section"),
    text: Text(3000),
    fields: z.array(Text(2000)).min(1).max(10).optional(),
  }),
  z.strictObject({ type: z.literal("context"), elements: z.array(Text(3000)).min(1).max(10) }),
  z.strictObject({ type: z.literal("actions"), elements: z.array(Button).min(1).max(25) }),
]);
const Message = z.strictObject({ text: z.string().min(1), blocks: z.array(Block).min(1).max(50) });

const OP = `op_${"a".repeat(32)}`;
const RUN = "run_01HZZZZZZZZZZZZZZZZZZZZZZZ";
type Loose = Partial<Omit<ToolgateEvent, "data">> & { data?: Record<string, unknown> };
// Only the fields each case reads: slack.ts shows a field only when it has its type's shape.
const event = (overrides: Loose = {}): ToolgateEvent =>
  ({
    id: `evt_${"b".repeat(32)}`,
    type: "approval.requested",
    at_ms: 1_767_225_600_000,
    tenant_id: "ten_1",
    run_id: RUN,
    operation_id: OP,
    tool: "refund",
    data: {
      target: "order:ord_1",
      arguments: { order_id: "ord_1", amount: 1200, note: "<!channel> & <https://evil|click>" },
      requested_by: "agent-for-u1",
      expires_at_ms: 1_767_226_500_000,
    },
    ...overrides,
  }) as ToolgateEvent;

describe("slackMessage", () => {
  it("an approval request: what waits, who asked, when it expires, and a button to decide", () => {
    const message = slackMessage(event(), "https://toolgate.example.com/");
    expect(Message.parse(message)).toEqual(message);
    expect(message.text).toBe("Approval needed: refund on order:ord_1");
    const [what, args, context, actions] = message.blocks;
    expect(what).toEqual({
      type: "section",
      text: { type: "mrkdwn", text: "*Approval needed*: `refund` on `order:ord_1`" },
      fields: [
        { type: "mrkdwn", text: "*Asked by*\nagent-for-u1" },
        {
          type: "mrkdwn",
          text: "*Expires*\n<!date^1767226500^{date_short_pretty} at {time}|2026-01-01T00:15:00.000Z>",
        },
      ],
    });
    // The arguments as data, never as Slack markup: <!channel> and links cannot fire.
    expect(args).toMatchObject({ type: "section", text: { type: "mrkdwn" } });
    const argsText = (args as { text: { text: string } }).text.text;
    expect(argsText).toContain('"amount": 1200');
    expect(argsText).toContain("&lt;!channel&gt; &amp; &lt;https://evil|click&gt;");
    expect(argsText).not.toContain("<!channel>");
    expect(context).toEqual({
      type: "context",
      elements: [
        { type: "mrkdwn", text: `run \`${RUN}\` · operation \`${OP}\` · \`approval.requested\`` },
      ],
    });
    expect(actions).toEqual({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: "Review and decide" },
          url: `https://toolgate.example.com/console/approvals#${OP}`,
          style: "primary",
        },
      ],
    });
  });

  it.each(EVENT_TYPES)("%s renders a valid Block Kit message", (type) => {
    const message = slackMessage(event({ type, data: {} }), "https://toolgate.example.com");
    expect(() => Message.parse(message)).not.toThrow();
  });

  it("a decision names who decided and how toolgate knows it (issue 35)", () => {
    const decided = (via: string | undefined) =>
      slackMessage(
        event({
          type: "approval.decided",
          data: {
            target: "order:ord_1",
            state: "approved",
            decided_by: "alice@example.com",
            decided_via: via,
          },
        }),
        "https://toolgate.example.com/",
      );
    const fieldsOf = (message: ReturnType<typeof slackMessage>) =>
      message.blocks.flatMap((b) => ("fields" in b && b.fields ? b.fields.map((f) => f.text) : []));
    expect(fieldsOf(decided("access"))).toContain(
      "*Decided by*\nalice@example.com (verified by Cloudflare Access)",
    );
    expect(fieldsOf(decided("api_key"))).toContain("*Decided by*\nalice@example.com (api_key)");
    expect(fieldsOf(decided(undefined))).toContain("*Decided by*\nalice@example.com");
  });

  it("keeps Slack's limits with huge arguments and long names", () => {
    const message = slackMessage(
      event({
        tool: "t".repeat(5000),
        data: { arguments: { blob: "<&>".repeat(5_000) }, requested_by: "<".repeat(5000) },
      }),
      "https://toolgate.example.com",
    );
    expect(() => Message.parse(message)).not.toThrow();
  });

  it("an event another version wrote (data not of its type's shape) renders, without the odd fields", () => {
    const message = slackMessage(
      event({ data: { target: 42, requested_by: "agent-for-u1", arguments: "not an object" } }),
      "https://t.example",
    );
    expect(() => Message.parse(message)).not.toThrow();
    expect(message.text).toBe("Approval needed: refund");
    expect(message.blocks.map((b) => b.type)).toEqual(["section", "context", "actions"]);
    expect(JSON.stringify(message.blocks[0])).toContain("*Asked by*\\nagent-for-u1");
  });

  it("an event without a run or operation has no button", () => {
    const message = slackMessage(
      event({ type: "lock.waiting_long", run_id: null, operation_id: null, data: {} }),
      "https://t.example",
    );
    expect(() => Message.parse(message)).not.toThrow();
    expect(message.blocks.map((b) => b.type)).toEqual(["section", "context"]);
  });
});

describe("endpoint.failing", () => {
  it("names the failing endpoint and its last error (escaped), and opens the console's webhooks page", () => {
    const message = slackMessage(
      event({
        type: "endpoint.failing",
        run_id: null,
        operation_id: null,
        tool: null,
        data: { webhook_id: "pager", reason: "schedule_ended", last_error: "HTTP 503 <b>" },
      }),
      "https://t.example",
    );
    expect(() => Message.parse(message)).not.toThrow();
    expect(message.text).toBe("A webhook endpoint is failing: a delivery to it was given up");
    expect(JSON.stringify(message.blocks[0])).toContain("*Endpoint*\\n`pager`");
    expect(JSON.stringify(message.blocks[0])).toContain("HTTP 503 &lt;b&gt;");
    expect(message.blocks.at(-1)).toMatchObject({
      type: "actions",
      elements: [{ url: "https://t.example/console/webhooks" }],
    });
  });
});

describe("consoleLink", () => {
  it.each([
    ["approval.requested", `https://t.example/console/approvals#${OP}`],
    ["approval.decided", `https://t.example/console/approvals#${OP}`],
    ["approval.expired", `https://t.example/console/approvals#${OP}`],
    ["operation.outcome_unknown", `https://t.example/console/unknown-outcomes#${OP}`],
    ["operation.recorded", `https://t.example/console/runs/${RUN}#${OP}`],
    ["turn.settled", `https://t.example/console/runs/${RUN}#${OP}`],
  ] as const)("%s → %s", (type, link) => {
    expect(consoleLink(event({ type }), "https://t.example")).toBe(link);
  });
});
