/**
 * Text a model, tool or connector hands back is recorded (PostgreSQL text and
 * jsonb), and PostgreSQL stores neither U+0000 nor a lone UTF-16 surrogate:
 * such output would fail every attempt to record the turn. The policy is to
 * refuse, not to rewrite — at the boundary, as a typed error of whoever sent
 * it (`provider_invalid_response` for a model, a tool error for a tool),
 * never silently altered text. See docs/architecture.md ("Poison output").
 */

// A NUL, a high surrogate not followed by a low one, or a low one not preceded by a high one.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching NUL is the point
const unstorable = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with `text`, or undefined when it can be stored. */
export function unstorableReason(text: string): string | undefined {
  const found = unstorable.exec(text);
  if (!found) return undefined;
  return found[0] === "\u0000"
    ? "a NUL character (U+0000)"
    : `a lone UTF-16 surrogate (U+${found[0].charCodeAt(0).toString(16).toUpperCase()})`;
}

/**
 * The first string or key in `value` that cannot be stored, with its path
 * (`content[1].text`), or undefined. Iterative; visits each value once.
 */
export function findUnstorableText(
  value: unknown,
  path = "",
): { path: string; reason: string } | undefined {
  const stack: { value: unknown; path: string }[] = [{ value, path }];
  while (stack.length > 0) {
    const current = stack.pop() as { value: unknown; path: string };
    const v = current.value;
    if (typeof v === "string") {
      const reason = unstorableReason(v);
      if (reason) return { path: current.path, reason };
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    if (Array.isArray(v)) {
      v.forEach((child, i) => {
        stack.push({ value: child, path: `${current.path}[${i}]` });
      });
      continue;
    }
    for (const [key, child] of Object.entries(v)) {
      const at = current.path === "" ? key : `${current.path}.${key}`;
      const reason = unstorableReason(key);
      if (reason) return { path: at, reason: `a key with ${reason}` };
      stack.push({ value: child, path: at });
    }
  }
  return undefined;
}

/**
 * A tool's outcome, with text no store can hold turned into the tool's error
 * (naming what was wrong, never quoting it): the turn goes on, recordable.
 */
export function storableToolOutcome<O extends { status: "ok" | "error"; output: string }>(
  name: string,
  outcome: O,
): O {
  const poison = unstorableReason(outcome.output);
  if (poison === undefined) return outcome;
  return {
    ...outcome,
    status: "error",
    output:
      outcome.status === "ok"
        ? `Error: ${name} returned ${poison}, which cannot be recorded`
        : `Error: ${name} failed (with an error message holding ${poison})`,
  };
}
