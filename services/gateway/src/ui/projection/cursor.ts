/**
 * Positions in a session's UI stream. One log event projects to zero or more
 * envelopes, so an envelope's cursor is `<event id>:<index>`, the index
 * counting every envelope the event projects to (whatever the tier), so the
 * default and debug streams share cursors. A bare event id (for example a
 * cursor of the Harn event stream) means "after everything that event
 * projects to".
 */

/** A parsed cursor. */
export interface UiCursor {
  eventId: string;
  /** Index of the envelope within its event; undefined: after the whole event. */
  index?: number;
}

/** The cursor of envelope `index` of event `eventId`. */
export function formatCursor(eventId: string, index: number): string {
  return `${eventId}:${index}`;
}

/** Parse a cursor; undefined when it is empty or malformed. */
export function parseCursor(text: string): UiCursor | undefined {
  const value = text.trim();
  if (value === "" || value.length > 256 || /[\s]/.test(value)) return undefined;
  const match = /^(.+):(\d{1,6})$/.exec(value);
  if (match) return { eventId: match[1]!, index: Number(match[2]) };
  if (value.includes(":")) return undefined;
  return { eventId: value };
}
