// The Slack format: one event → a Slack incoming-webhook message in Block Kit
// (https://api.slack.com/reference/block-kit/blocks): a `section` saying what waits (tool, target),
// who asked and when it expires, a `section` with the arguments as the approver sees them (the
// event's data is already redacted by its writer: never a secret or a redacted field), a `context`
// line with the ids, and an `actions` block whose button opens the exact console page. `text` is
// the notification fallback. Slack's limits are kept (section text ≤ 3000, field ≤ 2000, button
// text ≤ 75 characters); user text is escaped (&, <, > are Slack's control characters).
import { RouteData, type ToolgateEvent } from "../domain/journal/events.ts";

export type SlackText = { type: "mrkdwn" | "plain_text"; text: string };
export type SlackBlock =
  | { type: "section"; text: SlackText; fields?: SlackText[] }
  | { type: "context"; elements: SlackText[] }
  | {
      type: "actions";
      elements: Array<{ type: "button"; text: SlackText; url: string; style?: "primary" }>;
    };
export type SlackMessage = { text: string; blocks: SlackBlock[] };

/** What this format shows of an event's data beyond its headline and ids. */
type Shown = {
  target?: string;
  arguments?: object;
  requested_by?: string;
  expires_at_ms?: number;
  state?: string;
  decided_by?: string;
  /** How the decider was verified (issue 35): "access" says Cloudflare Access named the person. */
  decided_via?: string;
  /** A routed approval (issue 35): the votes so far of the quorum, and who may still vote. */
  votes?: string;
  may_vote?: string;
  endpoint?: string;
  last_error?: string;
};

// An event another version wrote is delivered as written (journal/events.ts readEvent, typed false):
// its data may not be what its type says, so a field is shown only when it has its type's shape.
const text = (value: unknown) => (typeof value === "string" && value ? value : undefined);
const json = (value: unknown) =>
  value && typeof value === "object" && !Array.isArray(value) ? value : undefined;

/** Each type says what Slack shows of it (null: its headline and ids): a new type fails `tsc` here. */
function shown(event: ToolgateEvent): Shown | null {
  switch (event.type) {
    case "approval.requested":
    case "approval.decided":
    case "approval.expired":
    case "approval.voted":
    case "approval.reminded":
    case "approval.escalated":
    case "approval.quorum_reached": {
      const { data } = event;
      return {
        ...routeShown(data.route),
        target: text(data.target),
        arguments: json(data.arguments),
        requested_by: text(data.requested_by),
        expires_at_ms: typeof data.expires_at_ms === "number" ? data.expires_at_ms : undefined,
        state: text(data.state),
        decided_by: text(data.decided_by),
        decided_via: text(data.decided_via),
      };
    }
    case "operation.outcome_unknown":
    case "operation.recorded":
      return { arguments: json(event.data.arguments) };
    case "endpoint.failing":
      return { endpoint: text(event.data.webhook_id), last_error: text(event.data.last_error) };
    // A freeze says what it covers, how and why (its id and who set it ride in the fields).
    case "freeze.created":
    case "freeze.lifted":
      return {
        target: text(JSON.stringify(event.data.scope)),
        state: text(`${event.data.mode}: ${event.data.reason}`),
        decided_by: text(event.data.by),
      };
    // A trip says which tripwire, on whom, and the freeze it made.
    case "tripwire.tripped":
      return {
        target: text(`${event.data.tripwire_id} · ${event.data.subject}`),
        state: text(`${event.data.mode} (freeze ${event.data.freeze_id}): ${event.data.reason}`),
        decided_by: text(`tripwire ${event.data.tripwire_id}`),
      };
    // A grant says what it covers, its bounds and who did this step.
    case "grant.created":
    case "grant.confirmed":
    case "grant.revoked":
    case "grant.used":
    case "grant.exhausted": {
      // Read as written: an event of another version may lack a field (never a crash here).
      const d = event.data as Partial<Record<string, unknown>>;
      const bounds = (["per_call_max", "total_max", "count"] as const)
        .filter((k) => typeof d[k] === "number")
        .map((k) => `${k.replace(/_/g, " ")} ${String(d[k])}`);
      const tools = Array.isArray(d.tools) ? d.tools.join(", ") : "";
      return {
        target: text(`${String(d.grant_id ?? "")} · ${tools}`),
        state: text(`${String(d.state ?? "")} (${bounds.join(", ")}): ${String(d.reason ?? "")}`),
        decided_by: text(d.by),
      };
    }
    // Who must connect what, and why; the link rides in the message for the person to pass on.
    case "credential.required":
      return {
        target: text(`${event.data.user} · ${event.data.provider}`),
        state: text(`${event.data.reason}: ${event.data.connect_url}`),
      };
    case "run.budget_exhausted":
    case "turn.settled":
    case "lock.waiting_long":
    case "webhook.test":
      return null;
  }
}

/** A route's votes ("1 of 2: alice") and who may still vote, when the data has the shape. */
function routeShown(route: unknown): Pick<Shown, "votes" | "may_vote"> {
  const parsed = RouteData.safeParse(route);
  if (!parsed.success) return {};
  const { votes, quorum, may_vote, excluded } = parsed.data;
  const names = votes.map((v) => (v.cast_by ? `${v.by} (by ${v.cast_by}, delegated)` : v.by));
  const groups = may_vote.map((g) =>
    [
      g.group,
      ...g.members,
      ...g.scopes.map((s) => `scope ${s}`),
      ...Object.entries(g.claims ?? {}).map(([k, v]) => `${k} ∋ ${v.join("|")}`),
      ...(g.email_domains ?? []).map((d) => `@${d}`),
    ].join(": "),
  );
  return {
    votes: `${votes.length} of ${quorum}${names.length ? `: ${names.join(", ")}` : ""}`,
    may_vote: `${groups.join("; ")}${excluded.length ? ` (not ${excluded.join(", ")})` : ""}`,
  };
}

const HEADLINES: Record<ToolgateEvent["type"], string> = {
  "approval.requested": "Approval needed",
  "approval.decided": "Approval decided",
  "approval.expired": "Approval expired",
  "approval.voted": "Approval vote counted",
  "approval.reminded": "Reminder: approval still needed",
  "approval.escalated": "Approval escalated to the next group",
  "approval.quorum_reached": "Approval quorum reached",
  "operation.outcome_unknown": "Outcome unknown: a person must settle it",
  "operation.recorded": "Operation recorded",
  "run.budget_exhausted": "Run budget exhausted",
  "turn.settled": "Turn settled",
  "lock.waiting_long": "A write is waiting long for its lock",
  "credential.required": "A call waits for its user to connect their account",
  "endpoint.failing": "A webhook endpoint is failing: a delivery to it was given up",
  "webhook.test": "Test message from toolgate: this channel is wired",
  "freeze.created": "Calls frozen by an operator",
  "freeze.lifted": "Freeze lifted: held calls continue",
  "tripwire.tripped": "Tripwire tripped: calls frozen",
  "grant.created": "Standing grant made",
  "grant.confirmed": "Standing grant confirmed: it is live",
  "grant.revoked": "Standing grant revoked",
  "grant.used": "A call ran under a standing grant",
  "grant.exhausted": "Standing grant used up: further calls ask a person",
};

export const escapeMrkdwn = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const cap = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`;

/** The console page where a person acts on this event (null: no page for it). */
export function consoleLink(event: ToolgateEvent, consoleUrl: string): string | null {
  const base = consoleUrl.replace(/\/+$/, "");
  const op = event.operation_id;
  if (event.type.startsWith("approval.") && op) return `${base}/console/approvals#${op}`;
  if (event.type === "operation.outcome_unknown" && op)
    return `${base}/console/unknown-outcomes#${op}`;
  if (event.type === "webhook.test") return `${base}/console/approvals`;
  if (event.type === "endpoint.failing") return `${base}/console/webhooks`;
  if (
    event.type === "freeze.created" ||
    event.type === "freeze.lifted" ||
    event.type === "tripwire.tripped"
  )
    return `${base}/console/freezes`;
  if (event.type.startsWith("grant.") && "grant_id" in event.data)
    return `${base}/console/grants/${event.data.grant_id}`;
  if (event.run_id) return `${base}/console/runs/${event.run_id}${op ? `#${op}` : ""}`;
  return null;
}

export function slackMessage(event: ToolgateEvent, consoleUrl: string): SlackMessage {
  const data = shown(event) ?? {};
  const headline = HEADLINES[event.type];
  const what = [
    event.tool ? `\`${escapeMrkdwn(event.tool)}\`` : null,
    data.target ? `on \`${escapeMrkdwn(data.target)}\`` : null,
  ]
    .filter(Boolean)
    .join(" ");
  const fields: SlackText[] = [];
  if (data.requested_by)
    fields.push({
      type: "mrkdwn",
      text: cap(`*Asked by*\n${escapeMrkdwn(data.requested_by)}`, 2000),
    });
  if (data.expires_at_ms !== undefined) {
    const iso = new Date(data.expires_at_ms).toISOString();
    const unix = Math.floor(data.expires_at_ms / 1000);
    fields.push({
      type: "mrkdwn",
      text: `*Expires*\n<!date^${unix}^{date_short_pretty} at {time}|${iso}>`,
    });
  }
  if (data.state) fields.push({ type: "mrkdwn", text: `*State*\n${escapeMrkdwn(data.state)}` });
  if (data.endpoint) {
    fields.push({
      type: "mrkdwn",
      text: cap(`*Endpoint*\n\`${escapeMrkdwn(data.endpoint)}\``, 2000),
    });
    if (data.last_error)
      fields.push({
        type: "mrkdwn",
        text: cap(`*Last error*\n${escapeMrkdwn(data.last_error)}`, 2000),
      });
  }
  if (data.votes)
    fields.push({ type: "mrkdwn", text: cap(`*Votes*\n${escapeMrkdwn(data.votes)}`, 2000) });
  if (data.may_vote)
    fields.push({ type: "mrkdwn", text: cap(`*May vote*\n${escapeMrkdwn(data.may_vote)}`, 2000) });
  if (data.decided_by)
    fields.push({
      type: "mrkdwn",
      text: cap(
        `*Decided by*\n${escapeMrkdwn(data.decided_by)}${data.decided_via ? ` (${escapeMrkdwn(data.decided_via === "access" ? "verified by Cloudflare Access" : data.decided_via)})` : ""}`,
        2000,
      ),
    });
  const blocks: SlackBlock[] = [
    {
      type: "section",
      text: { type: "mrkdwn", text: cap(`*${headline}*${what ? `: ${what}` : ""}`, 3000) },
      ...(fields.length > 0 ? { fields } : {}),
    },
  ];
  if (data.arguments) {
    // Escaped first, then cut (escaping can grow the text fivefold), never inside an entity.
    const json = cap(escapeMrkdwn(JSON.stringify(data.arguments, null, 2)), 2990).replace(
      /&[a-z]{0,3}…$/,
      "…",
    );
    blocks.push({ type: "section", text: { type: "mrkdwn", text: `\`\`\`${json}\`\`\`` } });
  }
  const ids = [
    event.run_id ? `run \`${event.run_id}\`` : null,
    event.operation_id ? `operation \`${event.operation_id}\`` : null,
    `\`${event.type}\``,
  ].filter((id): id is string => id !== null);
  blocks.push({ type: "context", elements: [{ type: "mrkdwn", text: ids.join(" · ") }] });
  const link = consoleLink(event, consoleUrl);
  if (link) {
    const label = event.type === "approval.requested" ? "Review and decide" : "Open in toolgate";
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: label },
          url: link,
          ...(event.type === "approval.requested" ? { style: "primary" as const } : {}),
        },
      ],
    });
  }
  const plainWhat = [event.tool, data.target ? `on ${data.target}` : null]
    .filter(Boolean)
    .join(" ");
  return { text: cap(`${headline}${plainWhat ? `: ${plainWhat}` : ""}`, 3000), blocks };
}
