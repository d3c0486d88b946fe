// Distributed mode entry point: the receipts service as its own process.
// Configured by env (DATABASE_URL, NATS_URL, PORT, TRELLIS_<SERVICE>_URL, …).
import { runServiceMain } from "@trellis/platform";
import { receiptsService } from "./definition.js";

await runServiceMain(receiptsService);
