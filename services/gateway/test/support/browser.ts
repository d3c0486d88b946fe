/**
 * What the browser tests share: Debian's Chromium (undefined when absent,
 * and the tests skip), the operator UI built from its current sources, and
 * the folder their screenshots go to.
 */
import { existsSync } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const uiDir = join(root, "ui");

/** Where screenshots of the browser tests go (`.ci-out/screenshots`). */
export const screenshots = join(root, ".ci-out", "screenshots");

/** The Chromium to drive: `TRELLIS_CHROMIUM`, else Debian's; undefined when none is installed. */
export const chromiumPath = [
  process.env.TRELLIS_CHROMIUM,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
]
  .filter((p): p is string => typeof p === "string" && p !== "")
  .find((p) => existsSync(p));

/** Newest modification time of the files under `dir`, in ms. */
async function newestChange(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

/**
 * Build the operator UI (`ui/dist`) when it is missing or older than its
 * sources: `npm install` builds it (the ui workspace's prepare script), but
 * not after the sources changed.
 */
export async function buildUiIfStale(): Promise<void> {
  const built = join(uiDir, "dist", "index.html");
  if (
    existsSync(built) &&
    (await stat(built)).mtimeMs >= (await newestChange(join(uiDir, "src")))
  ) {
    return;
  }
  const { build } = await import("vite");
  await build({ root: uiDir, configFile: join(uiDir, "vite.config.ts"), logLevel: "warn" });
}
