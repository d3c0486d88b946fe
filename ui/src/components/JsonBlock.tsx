/** Arguments or a result as readable JSON: a one-line summary that expands to the whole. */
import { argumentsSummary, argumentsText } from "../transcript.ts";

export function JsonBlock({
  label,
  value,
  open = false,
}: {
  label: string;
  value: unknown;
  open?: boolean;
}) {
  const text = argumentsText(value);
  if (text === null) return null;
  return (
    <details class="json-block" open={open}>
      <summary>
        <span class="json-label">{label}</span>{" "}
        <span class="json-summary">{argumentsSummary(value)}</span>
      </summary>
      <pre class="json" data-testid="tool-arguments">
        {text}
      </pre>
    </details>
  );
}
