// PLACEHOLDER (issue 8, approvals): /console/approvals — the pending-approvals queue. Whoever
// implements approvals replaces this file's body: list the tenant's inbox (exact frozen arguments
// with redactions, target URL, preview, requester, expiry) with approve/reject forms. Forms POST
// here; the console app has already checked the CSRF token of every POST before a route runs.
import { render } from "./layout.tsx";
import { consoleRoutes, definePage } from "./page.ts";

export const approvalsPage = definePage({
  nav: { label: "Pending approvals", href: "/console/approvals" },
  routes: consoleRoutes().get("/approvals", (c) =>
    render(
      c,
      "Pending approvals",
      <>
        <h1>Pending approvals</h1>
        <div class="notice" role="status">
          <p>This page is not built yet. Calls waiting for approval will be listed here, with their exact arguments and approve / reject buttons.</p>
        </div>
      </>,
    ),
  ),
});
