// Headless Chromium for the e2e console tests (Debian's package, driven by playwright-core),
// JavaScript off: the console must work as plain HTML forms and links. Screenshots go to
// test-results/<dir>/<name>.png.
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Page } from "playwright-core";
import { ROOT } from "../../scripts/lib/dev-server.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export async function openBrowser(shotsDir: string) {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does this), or set CHROMIUM_PATH`,
    );
  const shots = join(ROOT, "test-results", shotsDir);
  mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--headless",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    javaScriptEnabled: false,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(60_000);
  const shot = (name: string) =>
    page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  return { browser, context, page, shot };
}

/** Signs in to the console at `base` with a tenant API key; resolves on the console's home page. */
export async function signIn(page: Page, base: string, key: string) {
  await page.goto(`${base}/console`);
  await page.waitForURL(/\/console\/sign-in/);
  await page.getByLabel("Tenant API key").fill(key);
  await Promise.all([
    page.waitForURL(`${base}/console`),
    page.getByRole("button", { name: "Sign in" }).click(),
  ]);
}
