// A run's usage as its storage says it (store/run-rows.ts TURN_USAGE_COLUMN): the usage row, or the
// newest turn's snapshot when its version is higher. What tests read instead of the usage row alone.
export function usageAsStored(sql: SqlStorage): Record<string, SqlStorageValue> {
  const row = sql.exec("SELECT * FROM usage").toArray()[0]!;
  const hasSnapshots =
    sql.exec("SELECT COUNT(*) AS n FROM pragma_table_info('turns') WHERE name = 'usage'").one()
      .n !== 0;
  const newest = hasSnapshots
    ? sql
        .exec<{ usage: string }>(
          "SELECT usage FROM turns WHERE usage IS NOT NULL ORDER BY json_extract(usage, '$.version') DESC LIMIT 1",
        )
        .toArray()[0]
    : undefined;
  const snapshot = newest ? (JSON.parse(newest.usage) as Record<string, number>) : null;
  return snapshot && snapshot.version! > Number(row.version ?? 0) ? { ...row, ...snapshot } : row;
}
