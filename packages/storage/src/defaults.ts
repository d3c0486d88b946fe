/**
 * Storage's defaults, importable without storage itself
 * (`@trellis/storage/defaults`): the CLI checks its settings against them
 * before it loads any service.
 */

/** Default WAL bound between checkpoints: 64 MiB (~3,000 embedded chat turns). */
export const DEFAULT_CHECKPOINT_WAL_BYTES = 64 * 1024 * 1024;
/** Default time bound between checkpoints when WAL was written: 5 minutes. */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 5 * 60_000;
