// Distributed mode entry point: the chat service as its own process.
// Configured by env (DATABASE_URL, NATS_URL, PORT, TRELLIS_<SERVICE>_URL, …).
import { runServiceMain } from "@trellis/platform";
import { chatService } from "./definition.js";

await runServiceMain(chatService);
