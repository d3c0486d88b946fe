/** `bench/turn-footprint.ts`'s settings, read apart so they can be checked without starting it. */
import { choiceFromEnv, wholeFromEnv } from "./settings.js";

export interface FootprintSettings {
  warmup: number;
  turns: number;
  concurrency: number;
  mode: "embedded" | "distributed";
}

/** The settings from `env`, each refused by name when it is nonsense. */
export function footprintSettings(
  env: Readonly<Record<string, string | undefined>>,
): FootprintSettings {
  return {
    warmup: wholeFromEnv(env, "TRELLIS_FOOTPRINT_WARMUP", 40),
    turns: wholeFromEnv(env, "TRELLIS_FOOTPRINT_TURNS", 400),
    concurrency: wholeFromEnv(env, "TRELLIS_FOOTPRINT_CONCURRENCY", 8),
    mode: choiceFromEnv(env, "TRELLIS_FOOTPRINT_MODE", ["embedded", "distributed"]),
  };
}
