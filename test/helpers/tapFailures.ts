/**
 * Reads tap's TAP stream line by line and keeps every failed point with the names of the subtests
 * it sits in and its YAML diagnostics, so the run can restate its failures at the very end, where
 * a CI log that keeps only its tail still shows them. A failed subtest whose failures are already
 * kept (its own `not ok` line comes after theirs) is not repeated.
 */
export class TapFailures {
  private readonly names: string[] = [];
  private readonly paths: string[] = [];
  private readonly failures: string[] = [];
  private open: { indent: number; lines: string[]; inYaml: boolean } | undefined;

  line(raw: string): void {
    const indent = raw.length - raw.trimStart().length;
    const text = raw.trim();
    if (this.open) {
      if (!this.open.inYaml && (text !== '---' || indent !== this.open.indent)) this.close();
      else if (!this.open.inYaml) return void (this.open.inYaml = true);
      else if (text === '...' && indent === this.open.indent) return this.close();
      else return void this.open.lines.push(`    ${raw.slice(this.open.indent)}`);
    }
    const depth = Math.floor(indent / 4);
    const subtest = /^# Subtest: (.*)$/.exec(text);
    if (subtest) {
      this.names.length = depth;
      this.names[depth] = subtest[1]!;
      return;
    }
    const failed = /^not ok \d+ - (.*?)(?: # time=[\d.]+ms)?$/.exec(text);
    if (!failed || / # (?:TODO|SKIP)\b/i.test(failed[1]!)) return;
    const path = [...this.names.slice(0, depth), failed[1]!].join(' > ');
    if (this.paths.some((kept) => kept.startsWith(`${path} > `))) return;
    this.paths.push(path);
    this.open = { indent: indent + 2, lines: [`not ok: ${path}`], inYaml: false };
  }

  /** The failures in the order they were reported. */
  summary(): string[] {
    this.close();
    return this.failures;
  }

  private close(): void {
    if (!this.open) return;
    this.failures.push(this.open.lines.slice(0, 40).join('\n'));
    this.open = undefined;
  }
}
