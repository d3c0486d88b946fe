/**
 * Receipt routes: served by the receipts service's own REST handler, behind the
 * gateway's version, key and scope checks (see `../proxy.ts`).
 */
import { TrellisError } from "@trellis/runtime";
import type { RouteSpec } from "../context.js";
import { param, visibleTask } from "./common.js";

export function receiptRoutes(): RouteSpec[] {
  const delegated = (method: "GET" | "POST", path: string): RouteSpec => ({
    method,
    path,
    scope: "receipts:read",
    delegateTo: "receipts",
    handle: async () => {
      throw new TrellisError({
        reason: "internal_error",
        message: `${path} is served by receipts`,
      });
    },
  });
  return [
    delegated("GET", "/v1/receipts/public-keys"),
    delegated("POST", "/v1/receipts/verify"),
    delegated("GET", "/v1/receipts/{receipt_id}"),
    delegated("POST", "/v1/receipts/{receipt_id}/verify"),
    {
      ...delegated("GET", "/v1/tasks/{task_id}/receipts"),
      // A task of another workspace is absent (404), not an empty list.
      beforeHandOn: async (call) => {
        await visibleTask(call, param(call, "task_id"));
      },
    },
  ];
}
