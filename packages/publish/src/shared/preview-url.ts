/** `releases.preview_url` with the release id in place of `{release}`; null without one. */
export function previewUrlOf(template: string | undefined, id: string): string | null {
  return template === undefined ? null : template.replaceAll("{release}", id);
}
