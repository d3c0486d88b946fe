/**
 * The side panels as tabs: health, resume points, receipts, artifacts and
 * (debug tier) the raw stream. Every panel stays mounted (health keeps its
 * stream) and only the chosen one shows.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

export interface PanelTab {
  id: string;
  label: string;
  /** A small count next to the label. */
  count?: number;
  content: ComponentChildren;
}

export function SidePanels({
  tabs,
  initial,
  onClose,
}: {
  tabs: PanelTab[];
  initial?: string;
  onClose?: (() => void) | undefined;
}) {
  const [active, setActive] = useState(initial ?? tabs[0]?.id ?? "");
  useEffect(() => {
    if (initial) setActive(initial);
  }, [initial]);
  const current = tabs.some((t) => t.id === active) ? active : (tabs[0]?.id ?? "");
  const move = (event: KeyboardEvent, index: number) => {
    const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
    if (step === 0) return;
    event.preventDefault();
    const next = tabs[(index + step + tabs.length) % tabs.length];
    if (next) {
      setActive(next.id);
      document.getElementById(`tab-${next.id}`)?.focus();
    }
  };
  return (
    <aside class="side" aria-label="Session panels">
      <div class="tabs-row">
        <div class="tabs" role="tablist" aria-label="Session panels">
          {tabs.map((t, i) => (
            <button
              key={t.id}
              id={`tab-${t.id}`}
              type="button"
              role="tab"
              aria-selected={t.id === current}
              aria-controls={`panel-${t.id}`}
              tabIndex={t.id === current ? 0 : -1}
              class={`tab${t.id === current ? " active" : ""}`}
              onClick={() => setActive(t.id)}
              onKeyDown={(e) => move(e, i)}
            >
              {t.label}
              {t.count !== undefined && t.count > 0 ? <span class="count">{t.count}</span> : null}
            </button>
          ))}
        </div>
        {onClose ? (
          <button type="button" class="ghost small" aria-label="Close panels" onClick={onClose}>
            ✕
          </button>
        ) : null}
      </div>
      {tabs.map((t) => (
        <div
          key={t.id}
          id={`panel-${t.id}`}
          role="tabpanel"
          aria-labelledby={`tab-${t.id}`}
          class="tabpanel"
          hidden={t.id !== current}
        >
          {t.content}
        </div>
      ))}
    </aside>
  );
}
