// The frame of every console page: landmarks (header/nav/main/footer), a skip link, the nav built
// from the registered pages, who is signed in and the sign-out form. Every value is rendered as
// JSX text or attributes, which hono/jsx escapes; nothing here uses raw HTML for data.
import type { Context } from "hono";
import { html } from "hono/html";
import type { Child, FC } from "hono/jsx";
import type { ConsoleEnv, ConsoleSession, NavLink } from "./page.ts";

type Status = 200 | 400 | 401 | 403 | 404 | 409 | 413 | 500;
type LayoutProps = {
  title: string;
  session: ConsoleSession | null;
  nav: NavLink[];
  path: string;
  /** Reload the page every this many seconds (a queue page's counts; no script needed). */
  refreshSeconds?: number;
  children?: Child;
};

export const Layout: FC<LayoutProps> = ({
  title,
  session,
  nav,
  path,
  refreshSeconds,
  children,
}) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{`${title} · toolgate console`}</title>
      {refreshSeconds && <meta http-equiv="refresh" content={String(refreshSeconds)} />}
      <link rel="stylesheet" href="/console/assets/console.css" />
    </head>
    <body>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="site-header">
        <div class="bar">
          <a class="brand" href="/console">
            toolgate console
          </a>
          {session && (
            <nav aria-label="Console">
              <ul>
                {nav.map((link) => (
                  <li>
                    <a
                      href={link.href}
                      aria-current={isCurrent(link.href, path) ? "page" : undefined}
                    >
                      {link.label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          )}
          {session && (
            <div class="who">
              <span>
                {session.keyName} · <span class="mono">{session.tenantId}</span>
              </span>
              <form method="post" action="/console/sign-out">
                <input type="hidden" name="csrf" value={session.csrf} />
                <button type="submit">Sign out</button>
              </form>
            </div>
          )}
        </div>
      </header>
      <main id="main" tabindex={-1}>
        {children}
      </main>
      <footer class="site-footer">
        toolgate · every value on these pages is shown as text; tool output is untrusted input.
      </footer>
    </body>
  </html>
);

const isCurrent = (href: string, path: string) =>
  href === "/console" ? path === "/console" : path === href || path.startsWith(`${href}/`);

/** Renders a full page for the signed-in session (or the public sign-in frame when there is none). */
export function render(
  c: Context<ConsoleEnv>,
  title: string,
  body: Child,
  status: Status = 200,
  options?: { refreshSeconds?: number },
) {
  const session = c.get("session") ?? null;
  const nav = c.get("nav") ?? [];
  const page = (
    <Layout
      title={title}
      session={session}
      nav={nav}
      path={c.req.path}
      {...(options?.refreshSeconds ? { refreshSeconds: options.refreshSeconds } : {})}
    >
      {body}
    </Layout>
  );
  return c.html(html`<!DOCTYPE html>${page}`, status);
}

/** The problem page: what went wrong and what to do, never a stack or a raw upstream body. */
export function problemPage(
  c: Context<ConsoleEnv>,
  status: Exclude<Status, 200>,
  title: string,
  detail: string,
  next?: { href: string; label: string },
) {
  return render(
    c,
    title,
    <>
      <h1>{title}</h1>
      <div class="alert" role="alert">
        <p>{detail}</p>
      </div>
      <p>
        <a href={next?.href ?? "/console"}>{next?.label ?? "Back to the console"}</a>
      </p>
    </>,
    status,
  );
}

/** A POST's outcome, shown once on the page it redirected to (see flash.ts). */
export const FlashBox: FC<{ flash: { tone: "ok" | "error" | "info"; text: string } | null }> = ({
  flash,
}) =>
  flash ? (
    <div
      class={flash.tone === "error" ? "alert" : flash.tone === "ok" ? "notice success" : "notice"}
      role={flash.tone === "error" ? "alert" : "status"}
      data-flash={flash.tone}
    >
      <p>{flash.text}</p>
    </div>
  ) : null;
