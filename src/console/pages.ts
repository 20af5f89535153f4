// Every console page, in navigation order. Adding a page = one file exporting definePage(...) plus
// its line here; the header nav is built from this list.
import { approvalsPage } from "./approvals.tsx";
import { freezesPage } from "./freezes.tsx";
import { grantsPage } from "./grants.tsx";
import { homePage } from "./home.tsx";
import type { ConsolePage } from "./page.ts";
import { operationPage } from "./operation-page.tsx";
import { passkeysPage } from "./passkeys.tsx";
import { runPage } from "./run-page.tsx";
import { toolsPage } from "./tools-page.tsx";
import { unknownOutcomesPage } from "./unknown-outcomes.tsx";
import { webhooksPage } from "./webhooks.tsx";

export const PAGES: ConsolePage[] = [
  homePage,
  approvalsPage,
  unknownOutcomesPage,
  freezesPage,
  grantsPage,
  runPage,
  operationPage,
  toolsPage,
  webhooksPage,
  passkeysPage,
];
