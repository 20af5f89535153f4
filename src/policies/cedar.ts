// The Cedar engine (issue 21 part 2): the official `@cedar-policy/cedar-wasm` (its `web` build),
// instantiated once per isolate from the module wrangler bundles (a `.wasm` import is a compiled
// WebAssembly.Module on Workers, so the bundler-style `esm` build cannot be used as is).
import { initSync } from "@cedar-policy/cedar-wasm/web";
import * as cedarWeb from "@cedar-policy/cedar-wasm/web";
// The package's `exports` do not list the .wasm file, so it is imported by path; on Workers a
// .wasm import is a compiled WebAssembly.Module (wrangler's CompiledWasm rule).
// @ts-expect-error no type declarations for a .wasm module
import cedarModule from "../../node_modules/@cedar-policy/cedar-wasm/web/cedar_wasm_bg.wasm";

let ready = false;
/** The engine, instantiated on first use (synchronously: the module is already compiled). */
export function cedar(): typeof cedarWeb {
  if (!ready) {
    initSync({ module: cedarModule as WebAssembly.Module });
    ready = true;
  }
  return cedarWeb;
}
