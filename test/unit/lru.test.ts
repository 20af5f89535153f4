// The bounded caches (recorded outcomes in the RunObject, compiled tools per isolate): LRU by
// entry count and by total bytes, as tables of operations → surviving keys.
import { describe, expect, it } from "vitest";
import { LruCache } from "../../src/lru.ts";

type Op = ["set", string, number] | ["get", string];
const rows: Array<[string, { maxEntries: number; maxBytes: number }, Op[], string[], number]> = [
  [
    "under both limits nothing is evicted",
    { maxEntries: 3, maxBytes: 100 },
    [
      ["set", "a", 10],
      ["set", "b", 10],
    ],
    ["a", "b"],
    20,
  ],
  [
    "the count limit evicts the oldest",
    { maxEntries: 2, maxBytes: 100 },
    [
      ["set", "a", 1],
      ["set", "b", 1],
      ["set", "c", 1],
    ],
    ["b", "c"],
    2,
  ],
  [
    "a hit makes an entry young",
    { maxEntries: 2, maxBytes: 100 },
    [
      ["set", "a", 1],
      ["set", "b", 1],
      ["get", "a"],
      ["set", "c", 1],
    ],
    ["a", "c"],
    2,
  ],
  [
    "the byte limit evicts as many old entries as needed",
    { maxEntries: 10, maxBytes: 10 },
    [
      ["set", "a", 4],
      ["set", "b", 4],
      ["set", "c", 9],
    ],
    ["c"],
    9,
  ],
  [
    "an entry over the whole byte budget is not kept",
    { maxEntries: 10, maxBytes: 10 },
    [
      ["set", "a", 4],
      ["set", "big", 11],
    ],
    ["a"],
    4,
  ],
  [
    "re-setting a key replaces its size",
    { maxEntries: 10, maxBytes: 10 },
    [
      ["set", "a", 8],
      ["set", "a", 2],
      ["set", "b", 8],
    ],
    ["a", "b"],
    10,
  ],
  [
    "a miss changes nothing",
    { maxEntries: 2, maxBytes: 100 },
    [
      ["set", "a", 1],
      ["get", "zz"],
      ["set", "b", 1],
    ],
    ["a", "b"],
    2,
  ],
];

describe("LruCache", () => {
  it.each(rows)("%s", (_name, limits, ops, keys, bytes) => {
    const cache = new LruCache<string, number>(limits, (value) => value);
    for (const op of ops) {
      if (op[0] === "set") cache.set(op[1], op[2]);
      else cache.get(op[1]);
    }
    expect(cache.keys()).toEqual(keys);
    expect(cache.bytes).toBe(bytes);
    expect(cache.size).toBe(keys.length);
  });

  it("stays bounded under a long run of large values", () => {
    const cache = new LruCache<number, string>(
      { maxEntries: 256, maxBytes: 4 * 1024 * 1024 },
      (value) => value.length,
    );
    for (let i = 0; i < 5_000; i++) cache.set(i, "x".repeat(64 * 1024));
    expect(cache.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(cache.size).toBe(64);
    expect(cache.get(4_999)).toBeDefined();
    expect(cache.get(0)).toBeUndefined();
  });
});
