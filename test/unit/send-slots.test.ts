// The webhook requests of one consumer invocation take turns (issue 38, E4): never more than the
// connections at once nor the per-endpoint share, a freed slot to the endpoint with the fewest in
// flight (failing endpoints last), and a task starts (its timeout with it) only when its slot does.
import { describe, expect, it } from "vitest";
import { nextToStart, SendSlots } from "../../src/events/send-slots.ts";

/** A task that runs until released; `started` says whether its slot came. */
function gate() {
  let release!: () => void;
  const done = new Promise<void>((resolve) => (release = resolve));
  const task = { started: false, release, run: async () => ((task.started = true), await done) };
  return task;
}
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("nextToStart", () => {
  const w = (key: string, later = false) => ({ key, later });
  it.each([
    ["nobody waits", [], {}, -1],
    ["the longest waiting, all else equal", [w("a"), w("b")], {}, 0],
    ["the endpoint with fewer in flight", [w("a"), w("b")], { a: 1 }, 1],
    ["not an endpoint at its share", [w("a"), w("a")], { a: 2 }, -1],
    ["a failing endpoint after the others", [w("dead", true), w("b")], { b: 1 }, 1],
    ["a failing endpoint when no one else waits", [w("dead", true)], {}, 0],
  ])("%s", (_name, waiting, flying, expected) => {
    expect(nextToStart(waiting, new Map(Object.entries(flying)), 2)).toBe(expected);
  });
});

describe("SendSlots", () => {
  it("a hanging endpoint holds its share only: another endpoint's task starts at once", async () => {
    const slots = new SendSlots(6, 2);
    const hanging = Array.from({ length: 10 }, () => gate());
    for (const task of hanging) void slots.run("a/stuck", false, task.run);
    const healthy = gate();
    void slots.run("b/fine", false, healthy.run);
    await tick();
    expect(hanging.filter((task) => task.started)).toHaveLength(2);
    expect(healthy.started).toBe(true);
    healthy.release();
  });

  it("never more than the connections at once; a freed slot goes to the endpoint with fewer in flight", async () => {
    const slots = new SendSlots(3, 2);
    const a = [gate(), gate(), gate()];
    const b = [gate(), gate()];
    for (const task of a) void slots.run("a", false, task.run);
    for (const task of b) void slots.run("b", false, task.run);
    await tick();
    // a, a (its share), b: three at once.
    expect([...a, ...b].map((task) => task.started)).toEqual([true, true, false, true, false]);
    a[0]!.release();
    await tick();
    // a has 1 in flight, b has 1: the longest waiting goes (a's third), within a's share.
    expect([...a, ...b].map((task) => task.started)).toEqual([true, true, true, true, false]);
    b[0]!.release();
    await tick();
    expect(b[1]!.started).toBe(true);
    for (const task of [...a, ...b]) task.release();
  });

  it("remembers an endpoint that hung", () => {
    const slots = new SendSlots();
    expect(slots.hung("a")).toBe(false);
    slots.hang("a");
    expect(slots.hung("a")).toBe(true);
    expect(slots.hung("b")).toBe(false);
  });
});
