/**
 * Harness tools an adapter worker process loads in the worker tests
 * (`TRELLIS_HARNESS_TOOLS=services/adapters/test/worker-tools.ts`). Each run
 * prints one `tool <name> ran <input>` line, so a test can see that the tool
 * ran in the worker process and how often.
 */
import type { HarnessTool } from "@trellis/execution";
import { weatherTool } from "@trellis/execution/testing";

export const tools: HarnessTool[] = [
  weatherTool((input) => {
    process.stdout.write(`tool get_weather ran ${JSON.stringify(input)}\n`);
  }),
];
