// tierd entry point: `deno run -A main.ts …`, `deno task tierd -- …`, or the binary `dist/tierd …`.
import { main } from "./src/cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
