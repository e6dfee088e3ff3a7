import type { CommandHandler } from "../../command.js";
import { cliPackage } from "../../version.js";

export const versionCommand: CommandHandler<Record<string, never>> = async () => {
  const identity = await cliPackage();
  return {
    ok: true,
    result: { name: identity.name, version: identity.version },
    text: [`${identity.name} ${identity.version}`],
  };
};
