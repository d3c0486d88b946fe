import type { JsonObject } from "@bufbuild/protobuf";
import { TrellisError } from "@trellis/runtime";
import type {
  AgentExecutor,
  ExecutionAdapter,
  ExecutionRequest,
  ExecutionResult,
} from "./executor.js";
import { createScriptedAdapter } from "./scripted/scripted-adapter.js";

function unsupported(backend: string, known: readonly string[]): TrellisError {
  return new TrellisError({
    reason: "unsupported",
    message: `no execution backend ${JSON.stringify(backend)} (available: ${known.join(", ")})`,
    metadata: { backend },
  });
}

/**
 * An executor that runs adapters in this process (embedded mode, tests).
 * Defaults to the backends that need nothing external: "scripted".
 */
export function createLocalExecutor(
  adapters: readonly ExecutionAdapter[] = [createScriptedAdapter()],
): AgentExecutor {
  const byId = new Map(adapters.map((a) => [a.backendId, a]));
  const known = [...byId.keys()];
  const adapterFor = (backend: string) => {
    const adapter = byId.get(backend);
    if (!adapter) throw unsupported(backend, known);
    return adapter;
  };
  return {
    backends: () => known,
    validateDefinition(backend: string, definition: JsonObject) {
      adapterFor(backend).validateDefinition?.(definition);
    },
    execute(request: ExecutionRequest): Promise<ExecutionResult> {
      return adapterFor(request.agent.backend).execute(request);
    },
  };
}
