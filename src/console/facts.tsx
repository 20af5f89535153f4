// The facts list at the top of a console card (`<dl class="facts">`): label/value rows, with the rows
// every operation card shows alike — the run link (to the operation's entry on the run page) and a
// time as UTC text with its machine-readable datetime. Rows render in the order written; values are
// JSX text, which hono/jsx escapes.
import type { Child } from "hono/jsx";
import { utc } from "./format.ts";

export const Facts = ({ children }: { children?: Child }) => <dl class="facts">{children}</dl>;

/** One row; `mono` for ids and keys. */
export const Fact = ({
  label,
  mono,
  children,
}: {
  label: string;
  mono?: boolean;
  children?: Child;
}) => (
  <>
    <dt>{label}</dt>
    <dd class={mono ? "mono" : undefined}>{children}</dd>
  </>
);

/** The run this operation belongs to, linked to the operation's place on the run page. */
export const RunFact = ({ runId, operationId }: { runId: string; operationId: string }) => (
  <Fact label="Run">
    <a class="mono" href={`/console/runs/${runId}#${operationId}`}>
      {runId}
    </a>
  </Fact>
);

/** A moment (ISO string) as UTC text; `hint` follows in parentheses, e.g. "3 min ago". */
export const TimeFact = ({ label, at, hint }: { label: string; at: string; hint?: string }) => (
  <Fact label={label}>
    <time datetime={at}>{utc(at)}</time>
    {hint !== undefined && (
      <>
        {" "}
        <span class="hint">({hint})</span>
      </>
    )}
  </Fact>
);
