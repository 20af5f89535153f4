// SqlStore's table memory against a rolled-back transaction (workerd SQLite, a real Durable Object).
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { SqlStore } from "../../src/durable/store/sql-store.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT NOT NULL);`;
const fresh = () => (env as any).OPERATIONS.get((env as any).OPERATIONS.newUniqueId());

describe("SqlStore.transaction", () => {
  it("a table created in a transaction that throws is not remembered as existing", async () => {
    await runInDurableObject(fresh(), (_instance: unknown, state: DurableObjectState) => {
      const store = new SqlStore(state.storage, SCHEMA);
      expect(store.exists("t")).toBe(false);
      expect(() =>
        store.transaction(() => {
          store.ensureTable("t");
          expect(store.exists("t")).toBe(true);
          throw new Error("fails after the CREATE TABLE");
        }),
      ).toThrow("fails after the CREATE TABLE");
      // Rolled back with the transaction: the store asks SQLite again, and can create it again.
      expect(store.exists("t")).toBe(false);
      store.ensureTable("t");
      expect(store.run("INSERT INTO t (k, v) VALUES (1, 'x')")).toBe(1);
      expect(store.exists("t")).toBe(true);
    });
  });
});
