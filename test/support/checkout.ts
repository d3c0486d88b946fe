import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The checkout's root folder. */
export const checkoutRoot = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The checkout's files, relative to its root: tracked ones and new ones not
 * yet added (not ignored), so a check run before a commit sees them too;
 * not the ones deleted in the work tree.
 */
export function checkoutFiles(): string[] {
  return execFileSync("git", ["ls-files", "-z", "-co", "--exclude-standard"], {
    cwd: checkoutRoot,
    encoding: "utf8",
  })
    .split("\0")
    .filter((file) => file !== "" && existsSync(join(checkoutRoot, file)));
}
