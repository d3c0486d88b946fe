/**
 * The admin key of the default workspace, at start.
 *
 * - `TRELLIS_API_KEY` set: that key is the admin key; an earlier admin key of
 *   the workspace with a different value is revoked.
 * - unset, and an active admin key exists: nothing changes (it was shown when
 *   it was made; embedded mode also left it in `<data dir>/admin-api-key`).
 * - unset, and no admin key: one is generated, its hash stored, the key
 *   printed ONCE, and (with a data directory) written to
 *   `<data dir>/admin-api-key` with mode 0600.
 *
 * Replicas starting together serialise on a database lock, so at most one key
 * is generated.
 */
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import { isWellFormedApiKey, type KeyStore } from "../store/key-store.js";

/** Name of the admin key record. */
export const adminKeyName = "admin";
/** Actor id of the admin key. */
export const adminActorId = "admin";
/** File (in the data directory) holding a generated admin key. */
export const adminKeyFile = "admin-api-key";

/** Options of {@link bootstrapAdminKey}. */
export interface BootstrapOptions {
  db: Database<unknown>;
  keys: KeyStore;
  workspaceId: string;
  /** `TRELLIS_API_KEY`, when set. */
  configuredKey: string | undefined;
  /** Where to leave a generated key (embedded mode). */
  dataDir?: string | undefined;
  /** Prints the generated key (default: stdout). */
  print?: (text: string) => void;
}

/** What {@link bootstrapAdminKey} did. */
export type BootstrapResult =
  | { action: "configured" | "kept"; keyId: string }
  | { action: "generated"; keyId: string; file: string | undefined };

/** Make sure the default workspace has an admin key. */
export async function bootstrapAdminKey(options: BootstrapOptions): Promise<BootstrapResult> {
  if (options.configuredKey !== undefined && !isWellFormedApiKey(options.configuredKey)) {
    throw new TrellisError({
      reason: "config_invalid",
      message: "TRELLIS_API_KEY must be 8–512 printable ASCII characters without spaces",
      param: "TRELLIS_API_KEY",
    });
  }
  const lease = await options.db.acquireLock("trellis.gateway.admin-key");
  try {
    const existing = await options.keys.list({
      workspaceId: options.workspaceId,
      name: adminKeyName,
    });
    if (options.configuredKey !== undefined) {
      const match = await options.keys.authenticate(options.configuredKey);
      if (match !== undefined) {
        if (match.name !== adminKeyName || match.workspaceId !== options.workspaceId) {
          throw new TrellisError({
            reason: "config_invalid",
            message: `TRELLIS_API_KEY is already in use by API key ${match.id}; choose another value`,
            param: "TRELLIS_API_KEY",
          });
        }
        for (const old of existing) if (old.id !== match.id) await options.keys.revoke(old.id);
        return { action: "configured", keyId: match.id };
      }
      for (const old of existing) await options.keys.revoke(old.id);
      const created = await options.keys.create({
        name: adminKeyName,
        actorId: adminActorId,
        workspaceId: options.workspaceId,
        scopes: ["*"],
        key: options.configuredKey,
      });
      return { action: "configured", keyId: created.record.id };
    }
    const current = existing[0];
    if (current !== undefined) return { action: "kept", keyId: current.id };

    const created = await options.keys.create({
      name: adminKeyName,
      actorId: adminActorId,
      workspaceId: options.workspaceId,
      scopes: ["*"],
    });
    let file: string | undefined;
    if (options.dataDir !== undefined) {
      file = join(options.dataDir, adminKeyFile);
      await writeFile(file, `${created.key}\n`, { mode: 0o600 });
      // writeFile's mode only applies to a new file; tighten an old one too.
      await chmod(file, 0o600);
    }
    const print = options.print ?? ((text: string) => process.stdout.write(text));
    const lines = [
      "",
      `Trellis admin API key (workspace ${options.workspaceId}); shown once, keep it safe:`,
      `  ${created.key}`,
      ...(file ? [`  (also saved to ${file}, readable only by you)`] : []),
      "  send it as: Authorization: Bearer <key>",
      "",
    ];
    print(lines.join("\n"));
    return { action: "generated", keyId: created.record.id, file };
  } finally {
    await lease.release();
  }
}
