import { pgliteTarget } from "@trellis/storage/contract";
import { describeJournalContract } from "../src/journal/journal.contract.js";

describeJournalContract("pglite", pgliteTarget);
