/**
 * The gateway suites' distributed deployment: testkit's
 * {@link openTestkitDeployment} with `runService` as the runner.
 */
import { type RunningService, runService } from "@trellis/platform";
import {
  type DeploymentOptions,
  openDeployment as openTestkitDeployment,
  type TestDeployment as TestkitDeployment,
} from "@trellis/testkit/deployment";

export type { DeploymentOptions };

/** A deployment under test whose services are `runService` instances. */
export type TestDeployment = TestkitDeployment<Parameters<typeof runService>[0], RunningService>;

/** A test database and stream prefix with nothing running yet. */
export function openDeployment(
  database: string,
  options: DeploymentOptions = {},
): Promise<TestDeployment> {
  return openTestkitDeployment(database, runService, options);
}
