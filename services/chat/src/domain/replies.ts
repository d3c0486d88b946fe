/**
 * The user-facing replies of errored turns (harness-chat §10): one template
 * per bucket, configurable per deployment, rendered as a system message. Pure.
 *
 * Templates may use `{diagnostic}` (the upstream error's message) and
 * `{category}`. The user-correctable template MUST contain `{diagnostic}`:
 * harness-chat §10.3 requires the reply to carry enough of the underlying
 * error for the user to act on it.
 */
import { create } from "@bufbuild/protobuf";
import { ErrorBucket } from "@trellis/contracts/chat";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";

/** The reply template of each bucket. */
export interface ReplyTemplates {
  /** harness-chat §10.1. */
  sessionTerminating: string;
  /** harness-chat §10.2. */
  retryableTransient: string;
  /** harness-chat §10.3; must contain `{diagnostic}`. */
  userCorrectable: string;
}

/** The spec's default wording (harness-chat §10.1–§10.3). */
export const DEFAULT_REPLY_TEMPLATES: Readonly<ReplyTemplates> = Object.freeze({
  sessionTerminating: "This conversation can't continue. Please start a new one.",
  retryableTransient: "I had trouble responding. Try again in a moment.",
  userCorrectable:
    "That request couldn't be processed: {diagnostic}. Please adjust your message and try again.",
});

const PLACEHOLDER = /\{(diagnostic|category)\}/g;

/** A problem with a configured template, or undefined when it is usable. */
export function templateProblem(bucket: ErrorBucket, template: string): string | undefined {
  if (template.trim() === "") return "must not be empty";
  if (bucket === ErrorBucket.USER_CORRECTABLE && !template.includes("{diagnostic}")) {
    // harness-chat §10.3: over-redaction defeats the user-correctable bucket.
    return "must contain {diagnostic} (harness-chat §10.3: the reply carries the upstream diagnostic)";
  }
  return undefined;
}

/** The template of a bucket (unspecified buckets use the retryable one). */
export function templateFor(templates: ReplyTemplates, bucket: ErrorBucket): string {
  switch (bucket) {
    case ErrorBucket.SESSION_TERMINATING:
      return templates.sessionTerminating;
    case ErrorBucket.USER_CORRECTABLE:
      return templates.userCorrectable;
    default:
      return templates.retryableTransient;
  }
}

/**
 * The diagnostic as it goes into a sentence: one line, without the trailing
 * full stop the template supplies.
 */
export function sentenceFragment(diagnostic: string): string {
  return diagnostic
    .replace(/\s+/g, " ")
    .trim()
    .replace(/[.\s]+$/, "");
}

/** Render a template's text. */
export function renderReplyText(
  template: string,
  values: { diagnostic: string; category: string },
) {
  const diagnostic = sentenceFragment(values.diagnostic) || "the request was malformed";
  return template.replace(PLACEHOLDER, (_, name: string) =>
    name === "diagnostic" ? diagnostic : values.category,
  );
}

/** The system-role reply message of an errored turn (harness-chat §10). */
export function errorReply(
  templates: ReplyTemplates,
  bucket: ErrorBucket,
  values: { diagnostic: string; category: string },
): Message {
  const text = renderReplyText(templateFor(templates, bucket), values);
  return create(MessageSchema, {
    role: Role.SYSTEM,
    parts: [{ kind: { case: "text", value: { text } } }],
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Whether `text` is a rendering of `template`, compared case-insensitively
 * (spec README: "This conversation can't continue" and "this conversation
 * can't continue" match). Placeholders match any text.
 */
export function matchesTemplate(text: string, template: string): boolean {
  const pattern = template
    .split(PLACEHOLDER)
    .map((piece, i) => (i % 2 === 1 ? "[\\s\\S]*" : escapeRegExp(piece)))
    .join("");
  return new RegExp(`^${pattern}$`, "i").test(text.trim());
}
