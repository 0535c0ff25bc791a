// tierd entry point: `deno run -A main.ts …`, `deno task tierd -- …`, or the binary `dist/tierd …`.
import { main } from "./src/cli/main.ts";

// A reader that goes away (`tierd read … | head`) ends output quietly, as other tools do.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});

process.exitCode = await main(process.argv.slice(2));
