/**
 * Settings of the chat service, read from the host's environment once when the
 * service is built (handlers never read env).
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `TRELLIS_CHAT_REPLY_SESSION_TERMINATING` | reply of harness-chat §10.1 | the spec's text |
 * | `TRELLIS_CHAT_REPLY_RETRYABLE_TRANSIENT` | reply of harness-chat §10.2 | the spec's text |
 * | `TRELLIS_CHAT_REPLY_USER_CORRECTABLE` | reply of harness-chat §10.3; must contain `{diagnostic}` | the spec's text |
 *
 * Templates may use `{diagnostic}` and `{category}`.
 */
import { ErrorBucket } from "@trellis/contracts/chat";
import { env, loadConfig, TrellisError } from "@trellis/runtime";
import { DEFAULT_REPLY_TEMPLATES, type ReplyTemplates, templateProblem } from "./domain/replies.js";

/** Environment variables the chat service reads. */
export const chatConfigSchema = {
  TRELLIS_CHAT_REPLY_SESSION_TERMINATING: env
    .string()
    .default(DEFAULT_REPLY_TEMPLATES.sessionTerminating),
  TRELLIS_CHAT_REPLY_RETRYABLE_TRANSIENT: env
    .string()
    .default(DEFAULT_REPLY_TEMPLATES.retryableTransient),
  TRELLIS_CHAT_REPLY_USER_CORRECTABLE: env
    .string()
    .default(DEFAULT_REPLY_TEMPLATES.userCorrectable),
};

/** The chat service's validated settings. */
export interface ChatConfig {
  /** Error reply templates per bucket (harness-chat §10). */
  replies: ReplyTemplates;
}

/**
 * Read and validate the chat settings.
 *
 * @throws TrellisError `config_invalid` naming the variable, e.g. when the
 *   user-correctable template lacks `{diagnostic}`.
 */
export function loadChatConfig(source: Readonly<Record<string, string | undefined>>): ChatConfig {
  const raw = loadConfig(chatConfigSchema, source);
  const replies: ReplyTemplates = {
    sessionTerminating: raw.TRELLIS_CHAT_REPLY_SESSION_TERMINATING,
    retryableTransient: raw.TRELLIS_CHAT_REPLY_RETRYABLE_TRANSIENT,
    userCorrectable: raw.TRELLIS_CHAT_REPLY_USER_CORRECTABLE,
  };
  const checks: [string, ErrorBucket, string][] = [
    [
      "TRELLIS_CHAT_REPLY_SESSION_TERMINATING",
      ErrorBucket.SESSION_TERMINATING,
      replies.sessionTerminating,
    ],
    [
      "TRELLIS_CHAT_REPLY_RETRYABLE_TRANSIENT",
      ErrorBucket.RETRYABLE_TRANSIENT,
      replies.retryableTransient,
    ],
    ["TRELLIS_CHAT_REPLY_USER_CORRECTABLE", ErrorBucket.USER_CORRECTABLE, replies.userCorrectable],
  ];
  const problems = checks.flatMap(([name, bucket, template]) => {
    const problem = templateProblem(bucket, template);
    return problem ? [{ name, problem }] : [];
  });
  if (problems.length > 0) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `invalid configuration: ${problems.map((p) => `${p.name} ${p.problem}`).join("; ")}`,
      param: problems[0]?.name,
      metadata: { variables: problems.map((p) => p.name).join(",") },
    });
  }
  return { replies };
}
