/**
 * A task's events as the event log holds them: where the receipts processor
 * of embedded mode (the only consumer, `exclusive`) reads the earlier events
 * of a task it did not see from its first event — after a restart, or once
 * it let the task go from memory — instead of keeping a copy of every
 * event's facts in its own store. In embedded mode the log is the outbox
 * table, durable and complete, so that copy (`task_events`, five rows per
 * chat turn) only cost writes.
 *
 * Events about a task are not all on the task's resource (an event names
 * its task in `task_id`), and the log reads by workspace, session and
 * resource: the task's first event is found on its resource, then its
 * session is read from there, keeping the task's events.
 */
import type { EventLog, LoggedEvent } from "@trellis/eventlog";
import { taskIdOf } from "./domain/facts.js";

/** Reads a task's events (see the module comment). */
export interface TaskHistory {
  /**
   * The events naming the task, in log order, up to and including
   * `throughPosition`; none when the log holds no event of the task's own
   * resource.
   */
  eventsOf(
    task: { taskId: string; workspaceId: string; sessionId: string },
    throughPosition: bigint,
  ): Promise<LoggedEvent[]>;
}

/** Events read from the log per round trip. */
const PAGE = 1_000;

/** A {@link TaskHistory} over an event log. */
export function logTaskHistory(log: Pick<EventLog, "read">): TaskHistory {
  return {
    async eventsOf({ taskId, workspaceId, sessionId }, throughPosition) {
      if (!workspaceId || !taskId) return [];
      const [first] = await log.read({
        filter: { workspaceId, sessionId, resource: { object: "task", id: taskId } },
        limit: 1,
      });
      if (!first || first.position > throughPosition) return [];
      const events: LoggedEvent[] = [];
      let after = first.position - 1n;
      for (;;) {
        const page = await log.read({
          filter: { workspaceId, sessionId },
          after: { afterPosition: after },
          limit: PAGE,
        });
        for (const entry of page) {
          if (entry.position > throughPosition) return events;
          if (taskIdOf(entry.event) === taskId) events.push(entry);
        }
        const last = page.at(-1);
        if (page.length < PAGE || last === undefined) return events;
        after = last.position;
      }
    },
  };
}
