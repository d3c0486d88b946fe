/**
 * Progress of long CLI work (the embedded start and its migrations, a mesh
 * start, `trellis migrate`). On a terminal: one line per step with a spinner
 * and the time so far, replaced by ✓ / ✗ when it ends. Otherwise (CI, pipes,
 * files): a plain line when a step starts and one when it ends, no control
 * characters. Written to stderr, so stdout keeps only what a script reads.
 */

/** One step in progress. */
export interface ProgressStep {
  /** Replace the detail shown after the step's label (e.g. `3/6 ready`). */
  update(detail: string): void;
  /** The step ended well; `detail` is shown after its label. */
  done(detail?: string): void;
  /** The step failed; `detail` says what. */
  fail(detail?: string): void;
}

/** Starts steps. */
export interface Progress {
  start(label: string): ProgressStep;
}

const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

function seconds(sinceMs: number): string {
  return `${((performance.now() - sinceMs) / 1000).toFixed(1)} s`;
}

/**
 * Progress on `stream` (default stderr): animated when it is a terminal,
 * plain lines otherwise (or when `NO_COLOR` / `TERM=dumb` / `CI` says so).
 */
export function createProgress(
  stream: NodeJS.WriteStream = process.stderr,
  source: NodeJS.ProcessEnv = process.env,
): Progress {
  const animated =
    stream.isTTY === true && source.TERM !== "dumb" && !source.CI && source.NO_COLOR === undefined;
  return {
    start(label) {
      const started = performance.now();
      let detail = "";
      let ended = false;
      if (!animated) {
        stream.write(`${label}…\n`);
        return {
          update(next) {
            if (next !== detail && !ended) stream.write(`${label}: ${next}\n`);
            detail = next;
          },
          done(last) {
            if (ended) return;
            ended = true;
            stream.write(`${label}: done${last ? `, ${last}` : ""} (${seconds(started)})\n`);
          },
          fail(last) {
            if (ended) return;
            ended = true;
            stream.write(`${label}: FAILED${last ? `, ${last}` : ""} (${seconds(started)})\n`);
          },
        };
      }
      let frame = 0;
      const draw = (mark: string) => {
        const text = `${mark} ${label}${detail ? ` — ${detail}` : ""} (${seconds(started)})`;
        stream.write(`\r\x1b[2K${text}`);
      };
      const timer = setInterval(() => draw(frames[frame++ % frames.length] as string), 80);
      timer.unref();
      draw(frames[0] as string);
      const end = (mark: string, last: string | undefined) => {
        if (ended) return;
        ended = true;
        clearInterval(timer);
        if (last !== undefined) detail = last;
        draw(mark);
        stream.write("\n");
      };
      return {
        update(next) {
          detail = next;
          if (!ended) draw(frames[frame % frames.length] as string);
        },
        done: (last) => end("✓", last),
        fail: (last) => end("✗", last),
      };
    },
  };
}
