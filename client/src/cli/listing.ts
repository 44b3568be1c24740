import { printJson, type Context } from './context.js';
import { renderTable, type Column } from './table.js';

export interface ListingOptions<T, P extends { data: T[]; nextCursor: string | null }> {
  /** Every page (`--all`) or one. */
  all: boolean;
  page: () => Promise<P>;
  walk: () => AsyncGenerator<T>;
  columns: Column<T>[];
  /** The line under the table, from the items shown. */
  summary?: (items: readonly T[]) => string;
  /** What the list holds, for "no jobs" and the next-page hint. */
  noun: string;
}

/**
 * Prints a list: with --json the API's page object (or, with --all, one array of every item);
 * else a table, a summary line and, when there is a next page, how to get it.
 */
export async function showList<T, P extends { data: T[]; nextCursor: string | null }>(ctx: Context, options: ListingOptions<T, P>): Promise<void> {
  let items: T[];
  let nextCursor: string | null = null;
  if (options.all) {
    items = [];
    for await (const item of options.walk()) items.push(item);
    if (ctx.json) return printJson(items);
  } else {
    const page = await options.page();
    if (ctx.json) return printJson(page);
    items = page.data;
    nextCursor = page.nextCursor;
  }
  const out: string[] = [];
  if (items.length === 0) out.push(`No ${options.noun}.\n`);
  else out.push(renderTable(options.columns, items));
  if (options.summary && items.length > 0) out.push(`${options.summary(items)}\n`);
  if (nextCursor !== null && items.length > 0) out.push(`More ${options.noun}: add --cursor ${nextCursor} (or --all).\n`);
  process.stdout.write(out.join(''));
}
