/**
 * The project's own Harn Agents Protocol conformance suite: the protocol's
 * black-box flows in all ten categories, each starting by creating a
 * workspace with the admin key and working in it, as an outside client does.
 * Every deployment mode runs the same flows (`embedded.test.ts`,
 * `distributed.int.test.ts`).
 */
import { afterAll, beforeAll, describe } from "vitest";
import { HarnClient } from "./client.js";
import { authFlows, vaultFlows, webhookFlows } from "./flows-access.js";
import { outcomeFlows, receiptFlows, replayFlows } from "./flows-records.js";
import { coreFlows, idempotencyFlows, lifecycleFlows, streamingFlows } from "./flows-work.js";
import { ADMIN_KEY, type Target, type TargetKind } from "./targets.js";

/** Register every category against deployments of `kind`. */
export function describeHarnConformance(kind: TargetKind): void {
  describe(`Harn conformance flows: ${kind.name}`, () => {
    let target: Target | undefined;
    let client: HarnClient | undefined;
    const api = (): HarnClient => {
      if (client === undefined) throw new Error("the deployment did not start");
      return client;
    };
    beforeAll(async () => {
      target = await kind.start();
      client = new HarnClient(target.url, ADMIN_KEY);
    }, 180_000);
    afterAll(async () => {
      await target?.stop();
    }, 60_000);

    coreFlows(api);
    streamingFlows(api);
    lifecycleFlows(api);
    idempotencyFlows(api);
    authFlows(api);
    replayFlows(api);
    receiptFlows(api);
    vaultFlows(api);
    outcomeFlows(api);
    webhookFlows(api);
  });
}
