// The OAuth vault provider on a real PostgreSQL.
import { createDatabase } from "@trellis/storage";
import { createTestDatabase } from "@trellis/testkit";
import { describeOAuthVaults } from "./vault-oauth.contract.js";

describeOAuthVaults("postgres", async () => {
  const test = await createTestDatabase("vault_oauth");
  const db = await createDatabase({ kind: "postgres", url: test.url });
  return {
    db,
    close: async () => {
      await db.close();
      await test.drop();
    },
  };
});
