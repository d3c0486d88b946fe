/** RoutingService: where a request would run (Negotiate) and running it (Execute). */
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  contractInvalid,
  eventToProto,
  negotiationToProto,
  reasonToProto,
  requestFromProto,
} from "@trellis/adapter-sdk";
import {
  type ExecutionRequest as PbRequest,
  RoutingDecisionSchema,
  type RoutingService,
} from "@trellis/contracts/adapters";
import type { Router } from "@trellis/execution";

function decode(request: PbRequest | undefined, signal: AbortSignal) {
  if (!request) throw contractInvalid("request", "is required");
  return requestFromProto(request, { signal });
}

export function createRoutingHandlers(router: Router): ServiceImpl<typeof RoutingService> {
  return {
    async negotiate(request, context) {
      const { decision } = router.plan(decode(request.request, context.signal));
      return {
        decision: create(RoutingDecisionSchema, {
          backendId: decision.chosen?.backendId ?? "",
          supported: decision.chosen !== undefined,
          degraded: decision.chosen?.negotiation.degraded ?? false,
          reasons: decision.reasons.map(reasonToProto),
          candidates: decision.candidates.map((c) => ({
            backendId: c.backendId,
            negotiation: negotiationToProto(c.negotiation),
          })),
        }),
      };
    },
    async *execute(request, context) {
      const decoded = decode(request.request, context.signal);
      // A request that is itself invalid is the caller's error, not a result.
      router.plan(decoded);
      for await (const event of router.executeStreaming(decoded)) {
        yield { event: eventToProto(event) };
      }
    },
  };
}
