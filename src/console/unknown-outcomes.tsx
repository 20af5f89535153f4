// PLACEHOLDER (issue 8): /console/unknown-outcomes — writes whose outcome toolgate could not prove,
// waiting for a person. Whoever implements it replaces this file's body: list them with their
// attempts and what the upstream said, and a resolve form (succeeded / failed / resend + reason)
// that POSTs here (the console app has already checked the CSRF token of every POST).
import { render } from "./layout.tsx";
import { consoleRoutes, definePage } from "./page.ts";

export const unknownOutcomesPage = definePage({
  nav: { label: "Unknown outcomes", href: "/console/unknown-outcomes" },
  routes: consoleRoutes().get("/unknown-outcomes", (c) =>
    render(
      c,
      "Unknown outcomes",
      <>
        <h1>Unknown outcomes</h1>
        <div class="notice" role="status">
          <p>This page is not built yet. Operations whose outcome is unknown will be listed here, with their attempts and a form to resolve them.</p>
        </div>
      </>,
    ),
  ),
});
