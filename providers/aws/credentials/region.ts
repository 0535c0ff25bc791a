// The AWS region when the config leaves it empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's
// `region` in the shared config file, else us-east-1.
import type { Env } from "../../credentials/types.ts";
import { profileSettings, readIni, sharedFilePaths } from "./ini.ts";

/** The region tierd falls back to. */
export const DEFAULT_REGION = "us-east-1";

/**
 * The region to use, and where it came from (for `tierd probe`).
 * @param configured the config's `region` (`""` = not set)
 * @param profile the config's `profile` (`""` = AWS_PROFILE, else default)
 */
export async function resolveRegion(
  configured: string,
  profile: string,
  env: Env,
): Promise<{ region: string; from: string }> {
  if (configured) return { region: configured, from: "config" };
  for (const name of ["AWS_REGION", "AWS_DEFAULT_REGION"]) {
    const value = env(name);
    if (value) return { region: value, from: name };
  }
  const name = profile || env("AWS_PROFILE") || "default";
  const path = sharedFilePaths(env).config;
  const config = await readIni(path).catch(() => undefined);
  const region = config && profileSettings(name, { config })?.get("region");
  if (region) return { region, from: `${path} profile ${name}` };
  return { region: DEFAULT_REGION, from: "default" };
}
