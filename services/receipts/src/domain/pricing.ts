/**
 * Model prices (`TRELLIS_RECEIPT_MODEL_PRICES`) and what a receipt says a
 * model call cost.
 *
 * The table is JSON keyed by `<provider>/<model>`; a key ending in `*`
 * matches every model starting with what precedes it (providers answer with
 * dated names: `gpt-4o-mini` is answered by `gpt-4o-mini-2024-07-18`), the
 * longest match winning:
 *
 * ```json
 * {"openai/gpt-4o-mini*": {"input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6}}
 * ```
 *
 * A call's cost, in order: what its adapter reported (`cost_usd`, pricing
 * `reported`); none for a replay, which calls no provider (`replayed`);
 * tokens × the table's price (`price_table`); else 0 with pricing
 * `unknown` — never a guess. The pricing goes into each
 * `cost.provider_breakdown[].metadata` (the schema's extensible bag).
 *
 * Pure: no I/O.
 */

/** USD per million tokens of one model. */
export interface ModelPrice {
  inputUsdPerMTok: number;
  outputUsdPerMTok: number;
}

/** Prices by `<provider>/<model>` key (a trailing `*` is a prefix match). */
export type PriceTable = ReadonlyMap<string, ModelPrice>;

/** Where a call's cost came from. */
export type PricingSource = "reported" | "replayed" | "price_table" | "unknown";

/** A price table that is not one. */
export class PriceTableError extends Error {}

function price(value: unknown, at: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new PriceTableError(`${at} must be a non-negative number`);
  }
  return value;
}

/** Parses the table's JSON text; throws {@link PriceTableError} naming the bad entry. */
export function parsePriceTable(text: string): PriceTable {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new PriceTableError("is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new PriceTableError('must be a JSON object {"<provider>/<model>": {…}}');
  }
  const table = new Map<string, ModelPrice>();
  for (const [key, entry] of Object.entries(parsed)) {
    const slash = key.indexOf("/");
    if (slash <= 0 || slash === key.length - 1) {
      throw new PriceTableError(`key ${JSON.stringify(key)} must be <provider>/<model>`);
    }
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      throw new PriceTableError(`${key} must be an object`);
    }
    const fields = entry as Record<string, unknown>;
    const unknown = Object.keys(fields).filter(
      (f) => f !== "input_usd_per_mtok" && f !== "output_usd_per_mtok",
    );
    if (unknown.length > 0) {
      throw new PriceTableError(`${key}: unknown field ${unknown.join(", ")}`);
    }
    table.set(key, {
      inputUsdPerMTok: price(fields.input_usd_per_mtok, `${key}.input_usd_per_mtok`),
      outputUsdPerMTok: price(fields.output_usd_per_mtok, `${key}.output_usd_per_mtok`),
    });
  }
  return table;
}

/** The price of `provider`/`model`: the exact key, else the longest matching `*` key. */
export function priceOf(
  table: PriceTable | undefined,
  provider: string,
  model: string,
): { key: string; price: ModelPrice } | undefined {
  if (!table) return undefined;
  const name = `${provider}/${model}`;
  const exact = table.get(name);
  if (exact) return { key: name, price: exact };
  let best: { key: string; price: ModelPrice } | undefined;
  for (const [key, value] of table) {
    if (!key.endsWith("*")) continue;
    const prefix = key.slice(0, -1);
    if (name.startsWith(prefix) && (!best || key.length > best.key.length)) {
      best = { key, price: value };
    }
  }
  return best;
}

/** USD of a call at `price`. */
export function costAt(price: ModelPrice, inputTokens: number, outputTokens: number): number {
  return (inputTokens * price.inputUsdPerMTok + outputTokens * price.outputUsdPerMTok) / 1e6;
}
