/**
 * Domain errors leave the adapters service's methods as Connect errors with
 * an ErrorDetail. The server's interceptor does the same on the network, but
 * in embedded mode other services call these handlers in memory, without it.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@trellis/contracts/core";
import { TrellisError } from "@trellis/runtime";

/** Embedded mode has no work queue: remote workers cannot join it (FailedPrecondition). */
export function remoteWorkersUnavailable(): ConnectError {
  const detail = create(ErrorDetailSchema, {
    reason: "remote_workers_unavailable",
    domain: "adapters.trellis.dev",
  });
  return new ConnectError(
    "this router runs in-process backends only (embedded mode); remote workers join a distributed mesh",
    Code.FailedPrecondition,
    undefined,
    [{ desc: ErrorDetailSchema, value: detail }],
  );
}

/** A worker the registry does not know (NotFound: register again). */
export function workerNotFound(workerId: string): TrellisError {
  return new TrellisError({
    reason: "adapter_worker_not_found",
    message: `worker ${JSON.stringify(workerId)} is not registered (or its registration expired); register again`,
    param: "worker_id",
    metadata: { worker_id: workerId },
    domain: "adapters.trellis.dev",
  });
}

export { withErrorDetails } from "@trellis/runtime";
