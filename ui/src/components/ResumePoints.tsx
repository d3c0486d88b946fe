/**
 * Where the session can be branched from, calm: de-duplicated, the last few
 * shown and the rest behind "Show all". Re-read from session detail when
 * `version` (turns, approvals, markers seen) changes.
 */
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.ts";
import { errorText } from "../hooks.ts";
import { calmResumePoints, type ResumePoint, resumeLabel, withoutIds } from "../transcript.ts";

export function ResumePoints({
  sessionId,
  version,
  onBranch,
  debug,
}: {
  sessionId: string;
  version: string;
  onBranch(cursor: string): void;
  debug: boolean;
}) {
  const [points, setPoints] = useState<ResumePoint[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [all, setAll] = useState(false);
  useEffect(() => {
    let current = true;
    api<{ resume_points: ResumePoint[] }>(
      "GET",
      `/v1/ui/sessions/${encodeURIComponent(sessionId)}?envelopes=0`,
    ).then(
      (detail) => {
        if (!current) return;
        setError(null);
        setPoints(detail.resume_points);
      },
      (e) => current && setError(errorText(e)),
    );
    return () => {
      current = false;
    };
  }, [sessionId, version]);
  const { shown, hidden } = calmResumePoints(points ?? [], all ? Number.MAX_SAFE_INTEGER : 3);
  return (
    <section class="panel resume-points" data-testid="resume-points" aria-label="Resume points">
      {error && <p class="error">{error}</p>}
      {points !== null && shown.length === 0 && <p class="muted">Nothing to resume from yet.</p>}
      <ol class="points">
        {shown.map((p) => (
          <li
            key={p.event_id}
            data-testid="resume-point"
            data-kind={p.kind}
            data-cursor={p.resume_cursor}
          >
            <div>
              <span class="point-kind">{resumeLabel(p)}</span>
              {p.text ? <span class="muted"> · {debug ? p.text : withoutIds(p.text)}</span> : null}
              {debug ? <span class="debug-id mono"> {p.resume_cursor}</span> : null}
            </div>
            <button
              type="button"
              class="ghost small"
              data-testid="resume-branch"
              aria-label={`Branch from ${resumeLabel(p)}`}
              onClick={() => onBranch(p.resume_cursor)}
            >
              Branch
            </button>
          </li>
        ))}
      </ol>
      {hidden > 0 || all ? (
        <button type="button" class="ghost small" onClick={() => setAll((a) => !a)}>
          {all ? "Show fewer" : `Show all (${hidden} more)`}
        </button>
      ) : null}
    </section>
  );
}
