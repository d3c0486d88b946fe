import { postgresTarget } from "@trellis/storage/contract";
import { describeJournalContract } from "../src/journal/journal.contract.js";

describeJournalContract("postgres", postgresTarget);
