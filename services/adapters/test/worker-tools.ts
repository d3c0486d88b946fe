/**
 * Harness tools an adapter worker process loads in the worker tests
 * (`TRELLIS_HARNESS_TOOLS=services/adapters/test/worker-tools.ts`). Each run
 * prints one `tool <name> ran <input>` line, so a test can see that the tool
 * ran in the worker process and how often.
 */
import type { HarnessTool } from "@trellis/execution";

export const tools: HarnessTool[] = [
  {
    name: "get_weather",
    description: "The current weather of a city.",
    inputSchema: {
      type: "object",
      properties: { city: { type: "string", minLength: 1 } },
      required: ["city"],
      additionalProperties: false,
    },
    run(input) {
      process.stdout.write(`tool get_weather ran ${JSON.stringify(input)}\n`);
      return { city: input.city as string, temperature_c: 18, sky: "sunny" };
    },
  },
];
