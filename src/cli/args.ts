/**
 * The one argument convention of every `trellis` command and subcommand:
 *
 * | input                     | outcome                                        |
 * |---------------------------|------------------------------------------------|
 * | `-h` / `--help` anywhere  | the command's usage on stdout, exit 0, nothing |
 * |  (before `--`)            | else happens (no server, no files, no database)|
 * | an unknown option, a      | one line naming it and the usage on stderr,    |
 * |  missing value, too many  |  exit 2                                        |
 * |  arguments                |                                                |
 *
 * Commands parse with {@link parseCommand} and throw {@link UsageError} for
 * what they find wrong in their arguments; `main.ts` prints and exits.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";

/** Options of a command, as `node:util` parseArgs takes them. */
export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

/** How a command is called: its name (for messages), usage text and options. */
export interface CommandSpec<O extends OptionSpec> {
  /** As typed: `dev`, `keys create`, `receipts verify`. */
  name: string;
  /** Printed by `--help` (stdout) and after a usage error (stderr). */
  usage: string;
  options: O;
  /** Most positional arguments accepted (default 0). */
  maxPositionals?: number;
}

/**
 * Wrong arguments: `trellis <command>: <message>` and the usage go to stderr,
 * exit code 2.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    /** The command as typed, e.g. `keys create`. */
    readonly command: string,
    /** The usage text to print after the message. */
    readonly usage: string,
  ) {
    super(message);
  }
}

/** Whether `value` is a {@link UsageError}. */
export function isUsageError(value: unknown): value is UsageError {
  return value instanceof Error && value.name === "UsageError" && "usage" in value;
}

/** Whether the arguments ask for help (`-h` / `--help` before any `--`). */
export function wantsHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === "--") return false;
    if (arg === "-h" || arg === "--help") return true;
  }
  return false;
}

type Parsed<O extends OptionSpec> = ReturnType<
  typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>
>;

/** What {@link parseCommand} found: a request for help, or the parsed arguments. */
export type CommandArgs<O extends OptionSpec> =
  | { help: true }
  | ({ help: false } & Pick<Parsed<O>, "values" | "positionals">);

/**
 * Parse `args` for `spec`. Help wins over everything else (so `--help` is
 * always safe); anything malformed is a {@link UsageError}.
 */
export function parseCommand<const O extends OptionSpec>(
  spec: CommandSpec<O>,
  args: readonly string[],
): CommandArgs<O> {
  if (wantsHelp(args)) return { help: true };
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs({
      args: [...args],
      options: spec.options,
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    // parseArgs explains at length how to pass a positional starting with
    // '-'; the first sentence is what the user needs.
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(message.split(/\.\s/)[0] ?? message, spec.name, spec.usage);
  }
  const max = spec.maxPositionals ?? 0;
  if (parsed.positionals.length > max) {
    throw new UsageError(
      `unexpected argument ${JSON.stringify(parsed.positionals[max])}`,
      spec.name,
      spec.usage,
    );
  }
  return { help: false, values: parsed.values, positionals: parsed.positionals };
}

/** Print `usage` for `--help`; returns exit code 0. */
export function printUsage(usage: string): number {
  process.stdout.write(usage.endsWith("\n") ? usage : `${usage}\n`);
  return 0;
}
