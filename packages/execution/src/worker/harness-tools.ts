/**
 * The harness's tools as the deployment supplies them: tools are code, so an
 * operator names modules (`TRELLIS_HARNESS_TOOLS=/app/tools/crm.mjs,…`) whose
 * `tools` export — or default export — is an array of {@link HarnessTool}s.
 * Agents then name the tools they may use; nothing in an agent definition
 * can load code.
 */
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { TrellisError } from "@trellis/runtime";
import type { HarnessTool } from "../harness/tools.js";

function invalid(message: string): TrellisError {
  return new TrellisError({
    reason: "config_invalid",
    message: `invalid configuration: TRELLIS_HARNESS_TOOLS: ${message}`,
    param: "TRELLIS_HARNESS_TOOLS",
  });
}

function isTool(value: unknown): value is HarnessTool {
  if (typeof value !== "object" || value === null) return false;
  const tool = value as Record<string, unknown>;
  return (
    typeof tool.name === "string" &&
    typeof tool.description === "string" &&
    typeof tool.inputSchema === "object" &&
    tool.inputSchema !== null &&
    !Array.isArray(tool.inputSchema) &&
    typeof tool.run === "function" &&
    (tool.requiresApproval === undefined || typeof tool.requiresApproval === "boolean")
  );
}

/**
 * Loads the tools of every module `spec` names (comma-separated paths,
 * relative ones against `cwd`). Unset or empty: no tools.
 *
 * @throws TrellisError `config_invalid` when a module cannot be loaded or
 *   does not export an array of tools, or two tools share a name.
 */
export async function loadHarnessTools(
  spec: string | undefined,
  cwd: string = process.cwd(),
): Promise<HarnessTool[]> {
  const paths = (spec ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  const tools: HarnessTool[] = [];
  const origin = new Map<string, string>();
  for (const path of paths) {
    const absolute = isAbsolute(path) ? path : resolve(cwd, path);
    let loaded: Record<string, unknown>;
    try {
      loaded = (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
    } catch (error) {
      throw invalid(
        `cannot load ${path}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const exported = loaded.tools ?? loaded.default;
    if (!Array.isArray(exported)) {
      throw invalid(`${path} must export an array of tools as "tools" or as its default export`);
    }
    for (const [index, tool] of exported.entries()) {
      if (!isTool(tool)) {
        throw invalid(
          `${path}: tool ${index} needs a name, a description, an inputSchema object and a run function`,
        );
      }
      const earlier = origin.get(tool.name);
      if (earlier !== undefined) {
        throw invalid(`tool ${tool.name} is exported by both ${earlier} and ${path}`);
      }
      origin.set(tool.name, path);
      tools.push(tool);
    }
  }
  return tools;
}
