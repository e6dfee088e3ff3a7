import { COMMAND_NAMES, COMMANDS, commandWord } from "../index.js";
import type { CommandModule } from "../spec.js";

/**
 * distributor's answer to a completion request (`--get-yargs-completions`), from the words typed
 * so far: the program name first, the word being completed last. Undefined leaves the answer to
 * yargs, which offers command and flag names.
 *
 * After a flag that takes a value the answer is the flag's choices, or nothing at all: on an empty
 * answer the printed scripts fall back to file names, which a path wants, where yargs would offer
 * the flag list again. A command with subcommands offers them alone until one is given, and
 * `help` offers the commands.
 */
export function completionsFor(words: readonly string[]): string[] | undefined {
  const current = words.at(-1) ?? "";
  const typed = words.slice(1, -1);
  // Only switches (--help, --no-color) may come before the command word.
  const commandIndex = typed.findIndex((word) => !word.startsWith("-"));
  if (commandIndex === -1) return undefined;
  const name = typed[commandIndex];
  const after = typed.slice(commandIndex + 1);
  if (name === "help") return helpCompletions(after, current);
  const command = COMMANDS.find((spec) => commandWord(spec) === name);
  if (command === undefined) return undefined;
  const valueFlag = takesValue(command, after.at(-1));
  if (valueFlag !== undefined) return startingWith(valueFlag.choices ?? [], current);
  if (command.subcommands !== undefined && positionals(command, after).length === 0) {
    return startingWith(command.subcommands, current);
  }
  return undefined;
}

/** `help [command [subcommand]]`: the command names, then that command's subcommands. */
function helpCompletions(after: readonly string[], current: string): string[] | undefined {
  if (current.startsWith("-")) return undefined;
  const [name, ...rest] = after;
  if (name === undefined) return startingWith(COMMAND_NAMES, current);
  const command = COMMANDS.find((spec) => commandWord(spec) === name);
  if (rest.length === 0 && command?.subcommands !== undefined) {
    return startingWith(command.subcommands, current);
  }
  return [];
}

/** The flag `word` names when it is one of `command`'s flags that takes a value (`--config`). */
function takesValue(command: CommandModule, word: string | undefined) {
  if (word === undefined || !word.startsWith("--") || word.includes("=")) return undefined;
  const flag = command.flags[word.slice(2)];
  return flag?.type === "string" ? flag : undefined;
}

/** The positional words after the command word, flag values left out. */
function positionals(command: CommandModule, words: readonly string[]): string[] {
  const found: string[] = [];
  for (let index = 0; index < words.length; index++) {
    const word = words[index] as string;
    if (word === "--") return [...found, ...words.slice(index + 1)];
    if (!word.startsWith("-")) found.push(word);
    else if (takesValue(command, word) !== undefined) index += 1;
  }
  return found;
}

function startingWith(candidates: readonly string[], prefix: string): string[] {
  return candidates.filter((candidate) => candidate.startsWith(prefix));
}
