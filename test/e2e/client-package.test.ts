// `@toolgate/client` as another project gets it: `npm pack` of packages/client (its prepack builds
// ESM + .d.ts with tsc), the tarball installed offline into a scratch project outside the repo,
// a consumer type-checked against the shipped .d.ts (no skipLibCheck), and a plain `node` script in
// that project running a turn through the shared toolgate. Nothing resolves from the repo's
// sources: the scratch project sees only the tarball (and, for the SDK bridges, the peers).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerDemo, ROOT } from "../../scripts/lib/dev-server.mjs";
import { e2eServer, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl } = e2eServer();
let scratch: string;

const run = (cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) =>
  execFileSync(cmd, args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ...env },
    stdio: "pipe",
  });

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "toolgate-client-"));
  const packed = join(scratch, "packed");
  mkdirSync(packed);
  run("npm", ["pack", "--pack-destination", packed], join(ROOT, "packages/client"));
  const [tarball] = readdirSync(packed);
  const project = join(scratch, "project");
  mkdirSync(project);
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "scratch", private: true, type: "module" }),
  );
  // No network: the package has no dependencies, and its peers are optional (not installed).
  run(
    "npm",
    ["install", join(packed, tarball!), "--offline", "--no-audit", "--no-fund", "--ignore-scripts"],
    project,
  );
  // The SDK bridges' optional peers, as a project using them has them: the repo's installed copies.
  mkdirSync(join(project, "node_modules/@openai"));
  symlinkSync(
    join(ROOT, "node_modules/@openai/agents"),
    join(project, "node_modules/@openai/agents"),
  );
  symlinkSync(join(ROOT, "node_modules/ai"), join(project, "node_modules/ai"));
}, 120_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("@toolgate/client from its tarball", () => {
  it("ships only the client: ESM + .d.ts, no sources, nothing of the server but its shared shapes", () => {
    const listed = run(
      "tar",
      ["-tzf", join(scratch, "packed", readdirSync(join(scratch, "packed"))[0]!)],
      scratch,
    )
      .trim()
      .split("\n")
      .sort();
    expect(listed.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([]);
    expect(listed).toContain("package/dist/client/index.js");
    expect(listed).toContain("package/dist/client/index.d.ts");
    expect(
      listed.filter((f) => f.startsWith("package/dist/") && !f.startsWith("package/dist/client/")),
    ).toEqual([
      "package/dist/domain/journal/trace-event.d.ts",
      "package/dist/domain/journal/trace-event.js",
      "package/dist/domain/public-shapes.d.ts",
      "package/dist/domain/public-shapes.js",
    ]);
  });

  // The main entry only: the bridges' .d.ts name their SDK's types, whose own checking takes ~40 s
  // (the repo's tsc checks the bridges' sources; the turn below loads them).
  it("type-checks a consumer under nodenext against the shipped .d.ts, and refuses a wrong shape", () => {
    const project = join(scratch, "project");
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          lib: ["es2023", "dom"],
          types: [],
        },
        include: ["*.ts"],
      }),
    );
    writeFileSync(
      join(project, "ok.ts"),
      [
        `import { Toolgate, type Envelope, type TurnOutcome } from "@toolgate/client";`,
        `const backend = new Toolgate({ baseUrl: "http://toolgate.test", apiKey: "tg_key" });`,
        `const envelope: Envelope = { status: "succeeded", operation_id: "op_1", result: 1 };`,
        `export type Outcome = TurnOutcome<"anthropic">;`,
        `export { backend, envelope };`,
      ].join("\n"),
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    expect(run("node", [tsc, "-p", "."], project)).toBe("");
    // The types are the client's, not `any`: a wrong status is an error.
    writeFileSync(
      join(project, "bad.ts"),
      `import type { Envelope } from "@toolgate/client";\n` +
        `export const e: Envelope = { status: "finished", operation_id: "op_1", result: 1 };\n`,
    );
    let failed = "";
    try {
      run("node", [tsc, "-p", "."], project);
    } catch (error) {
      failed = String((error as { stdout: string }).stdout);
    }
    rmSync(join(project, "bad.ts"));
    expect(failed).toContain(`bad.ts(2,30): error TS2322: Type '"finished"' is not assignable`);
  });

  it("a plain node script in the scratch project creates a run and runs a turn through toolgate", async () => {
    const shop = shopNamespace(`pkg${Date.now().toString(36)}`);
    const { key } = await registerDemo(toolgateUrl, shop.url);
    const project = join(scratch, "project");
    writeFileSync(
      join(project, "turn.mjs"),
      `import { Toolgate } from "@toolgate/client";
import { toolgateTools } from "@toolgate/client/openai-agents";
import { toolgateTools as aiTools } from "@toolgate/client/ai-sdk";
const backend = new Toolgate({ baseUrl: process.env.TG_URL, apiKey: process.env.TG_KEY });
const { client } = await backend.createRun({
  user: { id: "u_pkg", scopes: ["payments:charge"] },
  tools: ["charge_card", "lookup_order"],
  context: { customer_id: "cus_pkg", charge_limit: 50000, refund_limit: 1000 },
});
const message = {
  id: "msg_pkg", type: "message", role: "assistant", model: "m", stop_sequence: null,
  stop_reason: "tool_use", usage: { input_tokens: 1, output_tokens: 1 },
  content: [{ type: "tool_use", id: "toolu_pkg", name: "charge_card", input: { amount: 700, currency: "usd" } }],
};
const outcome = await client.turn("anthropic", message);
console.log(JSON.stringify({ outcome, bridges: [typeof toolgateTools, typeof aiTools] }));
`,
    );
    const printed = JSON.parse(
      run("node", ["turn.mjs"], project, { TG_URL: toolgateUrl, TG_KEY: key }),
    );
    expect(printed.bridges).toEqual(["function", "function"]);
    expect(printed.outcome.status).toBe("settled");
    const [block] = printed.outcome.results.content;
    expect(block).toMatchObject({ type: "tool_result", tool_use_id: "toolu_pkg", is_error: false });
    expect(JSON.parse(block.content)).toMatchObject({ status: "succeeded" });
    const { effects } = await shop.state();
    expect(effects.map((e) => [e.path, e.body.amount])).toEqual([["/charges", 700]]);
  });
});
