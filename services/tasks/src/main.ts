// Distributed mode entry point: the tasks service as its own process.
// Configured by env (DATABASE_URL, NATS_URL, PORT, TRELLIS_<SERVICE>_URL, …).
import { runServiceMain } from "@trellis/platform";
import { tasksService } from "./definition.js";

await runServiceMain(tasksService);
