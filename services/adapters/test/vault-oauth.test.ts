// The OAuth vault provider on PGlite (embedded mode's store).
import { createDatabase } from "@trellis/storage";
import { describeOAuthVaults } from "./vault-oauth.contract.js";

describeOAuthVaults("pglite", async () => {
  const db = await createDatabase({ kind: "pglite" });
  return { db, close: () => db.close() };
});
