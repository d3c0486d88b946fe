/**
 * Which services `trellis mesh` runs in one process, read without loading
 * any service (the CLI checks its settings first).
 */
import { serviceNames } from "./service-names.js";

/**
 * Services `trellis mesh` runs in one process unless `TRELLIS_MESH_TOGETHER`
 * says otherwise: chat in the tasks process, so a chat turn's call to tasks
 * costs no hop (chat is stateless and calls only tasks).
 */
export const defaultMeshTogether = "tasks,chat";

/**
 * Reads a grouping of services into processes, as `trellis mesh` takes it
 * (`TRELLIS_MESH_TOGETHER`): groups separated by `;`, the services of a group
 * by `,` — `tasks,chat` runs chat in the tasks process; `none` runs every
 * service in a process of its own. Throws a one-line reason for a name that
 * is not a service, a service named twice, or the gateway in a group (it
 * serves callers outside the mesh and runs alone).
 */
export function parseTogether(text: string): string[][] {
  const trimmed = text.trim();
  if (trimmed === "none") return [];
  const known = serviceNames;
  const seen = new Set<string>();
  const groups: string[][] = [];
  for (const part of trimmed.split(";")) {
    const group = part.split(",").map((name) => name.trim());
    for (const name of group) {
      if (!known.includes(name))
        throw new Error(`unknown service ${JSON.stringify(name)} (one of: ${known.join(", ")})`);
      if (seen.has(name)) throw new Error(`${name} is named twice`);
      seen.add(name);
    }
    if (group.length < 2) continue;
    if (group.includes("gateway"))
      throw new Error(
        "the gateway runs in a process of its own (it serves callers outside the mesh)",
      );
    groups.push(group);
  }
  return groups;
}
