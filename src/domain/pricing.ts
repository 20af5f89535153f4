// Model usage → cost units, from the deployment's price table (TOOLGATE_MODEL_PRICES, JSON:
// { "<model or prefix*>": { "input_per_mtok": n, "output_per_mtok": n }, "*": {...} }).
// Unknown models with no "*" entry cost nothing: budgets then count tool cost only.
export type Price = { input_per_mtok: number; output_per_mtok: number };
export type ModelUsage = { model: string | null; input_tokens: number; output_tokens: number };

export function modelCost(usage: ModelUsage | null, prices: Record<string, Price>): number {
  if (!usage) return 0;
  const model = usage.model ?? "";
  const match =
    prices[model] ??
    Object.entries(prices).find(
      ([pattern]) =>
        pattern.endsWith("*") && pattern !== "*" && model.startsWith(pattern.slice(0, -1)),
    )?.[1] ??
    prices["*"];
  if (!match) return 0;
  return (
    (usage.input_tokens * match.input_per_mtok + usage.output_tokens * match.output_per_mtok) /
    1_000_000
  );
}
