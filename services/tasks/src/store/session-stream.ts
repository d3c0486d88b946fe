/**
 * The key of a session in the turn journal and the session owner: its
 * workspace and id. Session ids are unique per workspace (issue 22), so the
 * journal stream, the owner's lock and state, and the distributed lease of
 * a session all name both.
 */
import { createHash } from "node:crypto";

/** A session as the owner keys it (a session row is one). */
export interface SessionRef {
  workspace_id: string;
  id: string;
}

/** Longest journal stream name (storage's limit). */
const STREAM_LIMIT = 256;

/**
 * The journal stream of `session` — also the key of its lock, its state in
 * memory and (distributed) its lease: its workspace and id, unambiguously
 * (a JSON pair). A name longer than the journal allows is replaced by its
 * SHA-256.
 */
export function sessionStream(session: SessionRef): string {
  const name = JSON.stringify([session.workspace_id, session.id]);
  if (name.length <= STREAM_LIMIT) return name;
  return `sha256:${createHash("sha256").update(name).digest("hex")}`;
}
