/**
 * Server-Sent Events framing (WHATWG HTML "Server-sent events"; Harn v1
 * "Server-sent events"): each Event is one frame with `id` (the event id, the
 * resume cursor), `event` (the event kind) and `data` (the Event JSON on one
 * line). Comment lines (`: ping`) keep idle connections alive through proxies.
 */

// A field value must not contain CR or LF (they would end the field).
function oneLine(value: string): string {
  return value.replace(/[\r\n]+/g, " ");
}

/** One SSE frame. `data` is written as one `data:` line per line of text. */
export function sseFrame(frame: { id?: string; event?: string; data: string }): string {
  let out = "";
  if (frame.id !== undefined) out += `id: ${oneLine(frame.id)}\n`;
  if (frame.event !== undefined) out += `event: ${oneLine(frame.event)}\n`;
  for (const line of frame.data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  return `${out}\n`;
}

/** A comment line; clients ignore it, proxies see traffic. */
export function sseComment(text: string): string {
  return `: ${oneLine(text)}\n\n`;
}

/** Tell the client how long to wait before reconnecting. */
export function sseRetry(ms: number): string {
  return `retry: ${Math.max(0, Math.round(ms))}\n\n`;
}

/**
 * Parse an SSE stream's text into frames (for tests and clients). Comments are
 * returned with `comment` set; multi-line data is joined with `\n`.
 */
export interface ParsedSseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
  retry?: number;
}

/** Split complete frames off `buffer`; returns the frames and the unparsed rest. */
export function parseSse(buffer: string): { frames: ParsedSseFrame[]; rest: string } {
  const frames: ParsedSseFrame[] = [];
  const normalized = buffer.replace(/\r\n?/g, "\n");
  const blocks = normalized.split("\n\n");
  const rest = blocks.pop() ?? "";
  for (const block of blocks) {
    if (block === "") continue;
    const frame: ParsedSseFrame = {};
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        frame.comment = line.slice(1).trim();
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") frame.id = value;
      else if (field === "event") frame.event = value;
      else if (field === "data") data.push(value);
      else if (field === "retry") frame.retry = Number(value);
    }
    if (data.length > 0) frame.data = data.join("\n");
    frames.push(frame);
  }
  return { frames, rest };
}
