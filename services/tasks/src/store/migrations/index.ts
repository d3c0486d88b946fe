/** The tasks service's migrations, by name (applied in name order). */
import type { Migration } from "kysely";
import { createTasks } from "./2026_11_22_create_tasks.js";
import { replayAndFork } from "./2026_12_01_replay_and_fork.js";
import { taskChildren } from "./2026_12_10_task_children.js";
import { contextSummaries } from "./2026_12_20_context_summaries.js";
import { workspaceArchive } from "./2026_12_21_workspace_archive.js";
import { branchesAndConnectors } from "./2026_12_28_branches_and_connectors.js";
import { memories } from "./2026_12_28_memories.js";
import { agentState } from "./2026_12_30_agent_state.js";
import { turnJournal } from "./2027_01_01_turn_journal.js";
import { agentIdsPerWorkspace } from "./2027_01_04_agent_ids_per_workspace.js";
import { sessionLeases } from "./2027_03_02_session_leases.js";
import { taskRequirements } from "./2027_03_04_task_requirements.js";
import { journalDeadLetter } from "./2027_04_03_journal_dead_letter.js";
import { sessionIdsPerWorkspace } from "./2027_05_01_000_session_ids_per_workspace.js";
import { journalAppend } from "./2027_06_04_journal_append.js";

export const tasksMigrations: Record<string, Migration> = {
  "2026_11_22_create_tasks": createTasks,
  "2026_12_01_replay_and_fork": replayAndFork,
  "2026_12_10_task_children": taskChildren,
  "2026_12_20_context_summaries": contextSummaries,
  "2026_12_21_workspace_archive": workspaceArchive,
  "2026_12_28_branches_and_connectors": branchesAndConnectors,
  "2026_12_28_memories": memories,
  "2026_12_30_agent_state": agentState,
  "2027_01_01_turn_journal": turnJournal,
  "2027_01_04_agent_ids_per_workspace": agentIdsPerWorkspace,
  "2027_03_02_session_leases": sessionLeases,
  "2027_03_04_task_requirements": taskRequirements,
  "2027_04_03_journal_dead_letter": journalDeadLetter,
  "2027_05_01_000_session_ids_per_workspace": sessionIdsPerWorkspace,
  "2027_06_04_journal_append": journalAppend,
};
