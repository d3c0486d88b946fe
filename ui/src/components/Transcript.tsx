/**
 * The transcript: its own scroll area, pinned to the bottom while the
 * operator is at the bottom (new replies follow), with "Jump to latest"
 * when they scrolled up. Messages, tool calls in place with their
 * approvals, markers, the streamed reply and a typing indicator.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { SessionView } from "../contract.ts";
import {
  asksToScrollUp,
  isTyping,
  type ScrollInput,
  type TranscriptDetails,
  transcriptOf,
  withoutIds,
} from "../transcript.ts";
import { ApprovalCard } from "./ApprovalCard.tsx";
import { Message } from "./Message.tsx";
import { ToolCall } from "./ToolCall.tsx";

/** Readable names of timeline markers. */
const MARKER_LABELS: Record<string, string> = {
  resume_seed: "This branch starts here",
  context_warning: "Context getting full",
  context_compacted: "Earlier context summarized",
};

function markerLabel(kind: string): string {
  return MARKER_LABELS[kind] ?? kind.replace(/_/g, " ");
}

/** A marker's detail: all of it in the debug tier, else without internal ids (none for a branch seed). */
function markerText(kind: string, text: string, debug: boolean): string {
  if (debug) return text;
  if (kind === "resume_seed") return "";
  return withoutIds(text);
}

/** How close to the bottom (px) still counts as "at the bottom". */
const PIN_SLACK = 48;
/** After a scroll-up input, when to look whether the view moved (ms). */
const RECHECK_MS = 300;

export function Transcript({
  view,
  details,
  debug,
  onBranch,
  before,
}: {
  view: SessionView;
  details: TranscriptDetails;
  debug: boolean;
  onBranch(eventId: string): void;
  /** Shown above the messages (a branch's inherited history). */
  before?: ComponentChildren;
}) {
  const scroller = useRef<HTMLElement>(null);
  const pinned = useRef(true);
  const [away, setAway] = useState(false);
  const items = transcriptOf(view, details);
  const streaming = Object.entries(view.streaming);
  const typing = isTyping(view) && streaming.length === 0;

  const toBottom = () => {
    const el = scroller.current;
    if (el) el.scrollTop = el.scrollHeight;
  };

  // Follow new content while pinned.
  useLayoutEffect(() => {
    if (pinned.current) toBottom();
  });

  // Content that grows after layout (fonts, details opening) keeps the pin too.
  useEffect(() => {
    const el = scroller.current;
    if (!el || typeof ResizeObserver === "undefined") return undefined;
    const observer = new ResizeObserver(() => {
      if (pinned.current) toBottom();
    });
    const content = el.firstElementChild;
    if (content) observer.observe(content);
    return () => observer.disconnect();
  }, []);

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight <= PIN_SLACK;
    pinned.current = atBottom;
    setAway(!atBottom);
  };

  // Stop following on the operator's input, before its scroll event: a
  // render in between would pin the view back (the scroll event re-pins
  // if the view is still at the bottom). Only a view that can move up.
  const dragFrom = useRef<number | null>(null);
  const recheck = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(recheck.current), []);
  const onInput = (input: ScrollInput) => {
    const el = scroller.current;
    if (!el || el.scrollTop <= 0 || !asksToScrollUp(input)) return;
    pinned.current = false;
    // An input that moved no scroll (a nested scroller took it) leaves the
    // view at the bottom: one check after the gesture's last input re-pins
    // it there.
    clearTimeout(recheck.current);
    recheck.current = setTimeout(onScroll, RECHECK_MS);
  };

  const errors = view.turns.filter((t) => t.error);
  return (
    <div class="transcript-wrap">
      <section
        class="transcript"
        ref={scroller}
        onScroll={onScroll}
        onWheel={(e) => onInput({ kind: "wheel", deltaY: e.deltaY })}
        onKeyDown={(e) => {
          // Keys scroll the transcript only when it has the focus itself (not a field in it).
          if (e.target === e.currentTarget) onInput({ kind: "key", key: e.key });
        }}
        onTouchStart={(e) => {
          dragFrom.current = e.touches[0]?.clientY ?? null;
        }}
        onTouchMove={(e) => {
          const toY = e.touches[0]?.clientY;
          if (dragFrom.current === null || toY === undefined) return;
          onInput({ kind: "drag", fromY: dragFrom.current, toY });
          dragFrom.current = toY;
        }}
        data-testid="transcript"
        aria-label="Transcript"
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scroll area must be keyboard-scrollable.
        tabIndex={0}
      >
        <div class="transcript-content">
          {before}
          {items.length === 0 && streaming.length === 0 && !typing ? (
            <p class="empty-state">No messages yet. Say something to the agent below.</p>
          ) : null}
          <ul class="msg-list" aria-live="off">
            {items.map((item) => {
              switch (item.kind) {
                case "message":
                  return (
                    <Message
                      key={item.key}
                      entry={item.entry}
                      at={item.at}
                      onBranch={onBranch}
                      debug={debug}
                    />
                  );
                case "tool":
                  return (
                    <ToolCall
                      key={item.key}
                      row={item.row}
                      state={item.state}
                      args={item.arguments}
                      approval={item.approval}
                      debug={debug}
                    />
                  );
                case "approval":
                  return (
                    <li key={item.key} class="tool">
                      <ApprovalCard
                        approval={item.approval}
                        args={
                          item.approval.toolCallId
                            ? details.argumentsByCall[item.approval.toolCallId]
                            : undefined
                        }
                        debug={debug}
                      />
                    </li>
                  );
                default:
                  return (
                    <li
                      key={item.key}
                      class="marker"
                      data-testid="marker"
                      data-kind={item.marker.kind}
                    >
                      <span>{markerLabel(item.marker.kind)}</span>
                      {markerText(item.marker.kind, item.marker.text, debug) ? (
                        <span class="muted">
                          {" "}
                          · {markerText(item.marker.kind, item.marker.text, debug)}
                        </span>
                      ) : null}
                    </li>
                  );
              }
            })}
            {streaming.map(([task, text]) => (
              <li key={`stream-${task}`} class="msg assistant streaming" data-testid="streaming">
                <div class="bubble">
                  <div class="text plain">{text}</div>
                </div>
              </li>
            ))}
            {Object.entries(view.thinking).map(([task, text]) =>
              text ? (
                <li key={`thinking-${task}`} class="thinking">
                  <details>
                    <summary>Thinking</summary>
                    <p>{text}</p>
                  </details>
                </li>
              ) : null,
            )}
          </ul>
          {typing ? (
            <p class="typing" data-testid="typing" role="status">
              <span class="dots" aria-hidden="true">
                <span />
                <span />
                <span />
              </span>
              Agent is working…
            </p>
          ) : null}
          {errors.map((t) =>
            t.status === "canceled" || /cancel/i.test(t.error!.code) ? (
              // A stop the operator asked for is no alarm.
              <p key={`err-${t.taskId}`} class="marker" data-testid="turn-stopped">
                Stopped{debug ? ` · ${t.error!.message}` : ""}
              </p>
            ) : (
              <p key={`err-${t.taskId}`} class="error" data-testid="turn-error" role="alert">
                {t.error!.code}: {debug ? t.error!.message : withoutIds(t.error!.message)}
              </p>
            ),
          )}
        </div>
      </section>
      {away ? (
        <button
          type="button"
          class="jump"
          data-testid="jump-latest"
          aria-label="Jump to latest"
          onClick={() => {
            pinned.current = true;
            setAway(false);
            toBottom();
          }}
        >
          ↓ Jump to latest
        </button>
      ) : null}
    </div>
  );
}
