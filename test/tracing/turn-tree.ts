/**
 * The trace of one chat turn as the OTLP receiver got it, checked to be one
 * tree (shared by the distributed and the embedded trace tests).
 */
import { eventually } from "@trellis/testkit";
import type { OtlpReceiver, ReceivedSpan } from "@trellis/testkit/otlp-receiver";
import { expect } from "vitest";

/**
 * The spans of the trace of the turn in `sessionId`, once every hop and
 * every parent arrived (processes export in batches, and a streaming
 * call's span ends with its stream); asserts it is one tree whose root is
 * the first hop and whose hops descend from each other in the order given.
 */
export async function turnTrace(
  receiver: Pick<OtlpReceiver, "spans">,
  sessionId: string,
  hops: readonly ((s: ReceivedSpan) => boolean)[],
): Promise<ReceivedSpan[]> {
  const turn = await eventually(
    () =>
      receiver.spans.find(
        (s) => s.name === "trellis.turn" && s.attributes["trellis.session_id"] === sessionId,
      ),
    { timeoutMs: 15_000, what: "the turn's span" },
  );
  const inTrace = () => receiver.spans.filter((s) => s.traceId === turn.traceId);
  const complete = () => {
    const all = inTrace();
    const ids = new Set(all.map((s) => s.spanId));
    return (
      hops.every((hop) => all.some(hop)) && all.filter((s) => !ids.has(s.parentSpanId)).length === 1
    );
  };
  await eventually(complete, { timeoutMs: 15_000, what: "every hop's span in the trace" }).catch(
    (error: unknown) => {
      const seen = inTrace().map((s) => `${s.service} ${s.name} ${s.spanId}<-${s.parentSpanId}`);
      throw new Error(`${String(error)}\n${seen.join("\n")}`);
    },
  );
  const spans = inTrace();
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  expect(byId.size).toBe(spans.length); // no span exported twice
  // One tree: a single root — the first hop (the Send's server span, which
  // had no caller's traceparent) — and every other span's parent in the trace.
  const roots = spans.filter((s) => s.parentSpanId === "");
  expect(roots).toHaveLength(1);
  const root = roots[0] as ReceivedSpan;
  expect(hops[0]?.(root)).toBe(true);
  for (const span of spans) {
    if (span === root) continue;
    expect(byId.has(span.parentSpanId), `${span.service} ${span.name} has its parent`).toBe(true);
  }
  // The hops chain in order: each descends from the one before.
  const ancestors = (span: ReceivedSpan): ReceivedSpan[] => {
    const out: ReceivedSpan[] = [];
    for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) out.push(p);
    return out;
  };
  let previous = root;
  for (const hop of hops.slice(1)) {
    const span = spans.find(hop) as ReceivedSpan;
    expect(ancestors(span), `${span.service} ${span.name} under ${previous.name}`).toContain(
      previous,
    );
    previous = span;
  }
  return spans;
}
