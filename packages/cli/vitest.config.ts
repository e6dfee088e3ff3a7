import { packageProject } from "../../vitest.shared.ts";

// The end-to-end suites spawn the built binary; the global setup brings `dist` up to date first.
export default packageProject("cli", { globalSetup: ["test/global-setup.ts"] });
