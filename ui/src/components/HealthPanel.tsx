/**
 * The session's health, calm: the score and status, only the flags that
 * are on (or "All clear"), their reasons and a recovery hint. A waiting
 * approval is ordinary, not an alarm.
 */
import { useEffect, useState } from "preact/hooks";
import { openHealthStream } from "../api.ts";
import { errorText } from "../hooks.ts";
import { flagsOn, withoutIds } from "../transcript.ts";

const TONE: Record<string, string> = { healthy: "ok", watch: "warn", unhealthy: "bad" };

export function HealthPanel({ sessionId, debug }: { sessionId: string; debug: boolean }) {
  const [health, setHealth] = useState<Record<string, unknown> | null>(null);
  const [fatal, setFatal] = useState<string | null>(null);
  useEffect(() => {
    setHealth(null);
    setFatal(null);
    return openHealthStream(sessionId, setHealth, (e) => setFatal(errorText(e)));
  }, [sessionId]);
  const on = flagsOn(health);
  const reasons = (Array.isArray(health?.reasons) ? health.reasons : []) as {
    flag: string;
    message: string;
  }[];
  const enforcement = (health?.policy as { enforcement?: { reason?: string } } | undefined)
    ?.enforcement;
  const status = String(health?.status ?? "");
  return (
    <section
      class="panel health"
      data-testid="health"
      data-score={String(health?.score ?? "")}
      data-status={status}
      aria-label="Health"
    >
      {fatal && <p class="error">{fatal}</p>}
      {!health && !fatal && <p class="muted">Reading health…</p>}
      {health && (
        <>
          <p class="health-line">
            <span class={`badge tone-${TONE[status] ?? "neutral"}`}>{status || "unknown"}</span>{" "}
            <span class="muted">score {String(health.score ?? "?")}</span>
          </p>
          {on.length === 0 ? (
            <p class="all-clear" data-testid="health-clear">
              All clear
            </p>
          ) : (
            <ul class="flags">
              {on.map(({ flag, label }) => (
                <li key={flag} class="flag" data-flag={flag} data-on="true">
                  {label}
                  {reasons
                    .filter((r) => r.flag === flag)
                    .map((r, i) => (
                      <span key={`${flag}-${i}`} class="muted">
                        {" — "}
                        {debug ? r.message : withoutIds(r.message)}
                      </span>
                    ))}
                </li>
              ))}
            </ul>
          )}
          {typeof health.recovery_hint === "string" &&
          health.recovery_hint !== "" &&
          on.length > 0 ? (
            <p class="muted">
              Hint: {debug ? health.recovery_hint : withoutIds(health.recovery_hint)}
            </p>
          ) : null}
          {enforcement?.reason && <p class="bad">Enforced: {enforcement.reason}</p>}
        </>
      )}
    </section>
  );
}
