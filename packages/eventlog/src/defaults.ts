/**
 * The event log's defaults, importable without the log itself
 * (`@trellis/eventlog/defaults`): the CLI checks its settings against them
 * before it loads any service.
 */

/** Events a windowed log keeps in memory unless told otherwise. */
export const DEFAULT_EVENT_WINDOW = 20_000;
