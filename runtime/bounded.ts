/**
 * Resolves when `work` settles or after `ms`, whichever is first; never rejects. The waits of a
 * stop go through it, so a stop always ends, whatever it waits for.
 */
export async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.then(() => undefined, () => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
