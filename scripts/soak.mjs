// npm run soak: the fault soak in workerd (test/integration/soak.test.ts, SOAK_SEED and SOAK_OPS),
// then the soak with real crashes (scripts/soak-kill.mjs, SOAK_KILL_*). Settings are checked first:
// exit 2 with one line for a bad one, 1 when either soak found a violation, 0 when both held.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { envInteger, EXIT, runCli } from "./lib/cli.mjs";
import { ROOT } from "./lib/dev-server.mjs";

await runCli("soak", async () => {
  if (process.argv.length > 2)
    throw new Error(
      `takes no arguments (got ${process.argv[2]}): set SOAK_SEED, SOAK_OPS, SOAK_KILL_OPS, SOAK_KILL_MS`,
    );
  const seed = envInteger("SOAK_SEED", Math.floor(Date.now() / 1000));
  const ops = envInteger("SOAK_OPS", 300);
  for (const name of ["SOAK_KILL_OPS", "SOAK_KILL_MS", "SOAK_KILL_PORT"]) envInteger(name, 0);
  const env = { ...process.env, SOAK_SEED: String(seed), SOAK_OPS: String(ops) };
  const run = (args) =>
    spawnSync(process.execPath, args, { cwd: ROOT, env, stdio: "inherit" }).status;
  const vitest = join(ROOT, "node_modules", "vitest", "vitest.mjs");
  const faults = run([vitest, "run", "--project", "integration", "test/integration/soak.test.ts"]);
  if (faults !== 0) return EXIT.broken;
  const kills = run([join(ROOT, "scripts", "soak-kill.mjs")]);
  return kills === null ? EXIT.couldNotRun : kills;
});
