// Plain-text tables for the CLI: a header row and aligned columns, two spaces apart, numbers
// right-aligned. No colours and no box drawing, so the output greps and diffs well.

/** How a column aligns: text left, numbers and sizes right. */
export type Align = "left" | "right";

/**
 * Renders rows under a header, each column as wide as its widest cell.
 *
 * @param headers the column titles
 * @param rows the cells, one array per row, as many as `headers`
 * @param align per column; @default "left" for every column
 * @param indent put before every line
 * @returns the lines, without a trailing line break
 */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
  indent = "",
): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: readonly string[]) =>
    indent + cells.map((cell, i) => {
      const last = i === cells.length - 1;
      if (align[i] === "right") return cell.padStart(widths[i]);
      return last ? cell : cell.padEnd(widths[i]);
    }).join("  ");
  return [line(headers), ...rows.map(line)].join("\n");
}
