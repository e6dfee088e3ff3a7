/**
 * The one place that decides whether output may be coloured, and the one way to colour it. No
 * output is coloured today; anything that adds colour goes through `paint`, so that `--no-color`
 * and NO_COLOR (https://no-color.org: set and not empty) keep working.
 */
export interface ColourChoice {
  /** `--no-color` was given. */
  noColorFlag: boolean;
  /** The environment, for NO_COLOR. */
  env: Readonly<Record<string, string | undefined>>;
  /** The stream the coloured text goes to is a terminal. */
  isTTY: boolean;
}

export function colourEnabled(choice: ColourChoice): boolean {
  if (choice.noColorFlag) return false;
  const noColor = choice.env.NO_COLOR;
  if (noColor !== undefined && noColor !== "") return false;
  return choice.isTTY;
}

const STYLES = { bold: [1, 22], red: [31, 39], green: [32, 39], yellow: [33, 39] } as const;

export type Style = keyof typeof STYLES;

/** `text` wrapped in the ANSI codes of `style` when colour is enabled, else `text` unchanged. */
export function paint(text: string, style: Style, enabled: boolean): string {
  if (!enabled) return text;
  const [open, close] = STYLES[style];
  return `\u001b[${open}m${text}\u001b[${close}m`;
}
