/** Benchmark settings read from the environment, refused by name when they are nonsense. */

/** A whole number >= 1 from `env[name]`, or `fallback` when unset or empty. */
export function wholeFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a whole number >= 1, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** One of `choices` from `env[name]`, or the first choice when unset or empty. */
export function choiceFromEnv<const C extends readonly [string, ...string[]]>(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  choices: C,
): C[number] {
  const raw = env[name];
  if (raw === undefined || raw === "") return choices[0];
  if (!choices.includes(raw)) {
    throw new Error(`${name} must be ${choices.join(" or ")}, got ${JSON.stringify(raw)}`);
  }
  return raw;
}
