// Distributed mode entry point: the adapters service as its own process.
// Configured by env (DATABASE_URL, NATS_URL, PORT, TRELLIS_<SERVICE>_URL, …).
import { runServiceMain } from "@trellis/platform";
import { adaptersService } from "./definition.js";

await runServiceMain(adaptersService);
