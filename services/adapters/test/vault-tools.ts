/**
 * A harness tool that reads a vault secret (the vault tests load it with
 * `TRELLIS_HARNESS_TOOLS`): `get_weather` reads `vlt_weather/WEATHER_API_KEY`
 * through `context.secret` and answers with the value's SHA-256 — proof it
 * got the value, without ever putting the value in its output.
 */
import { createHash } from "node:crypto";
import type { HarnessTool } from "@trellis/execution";

/** The vault secret the tool reads. */
export const WEATHER_SECRET = "vlt_weather/WEATHER_API_KEY";

export const tools: HarnessTool[] = [
  {
    name: "get_weather",
    description: "The current weather of a city (needs the weather API key from the vault).",
    inputSchema: {
      type: "object",
      properties: { city: { type: "string", minLength: 1 } },
      required: ["city"],
      additionalProperties: false,
    },
    run(input, context) {
      const key = context.secret(WEATHER_SECRET);
      return {
        city: input.city as string,
        temperature_c: 18,
        key_sha256: key === undefined ? null : createHash("sha256").update(key).digest("hex"),
      };
    },
  },
];
