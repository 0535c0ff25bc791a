// The AWS shared `credentials` and `config` files: a small INI reader (sections, `key = value`,
// comments, indented continuation lines for nested keys) and where the files are
// (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, else ~/.aws/).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Env } from "../../credentials/types.ts";

/** Sections by name, each a map of lowercase keys to values. */
export type IniFile = Map<string, Map<string, string>>;

/** Parses INI text: `[section]`, `key = value`, `#`/`;` comments; nested lines are skipped. */
export function parseIni(text: string): IniFile {
  const out: IniFile = new Map();
  let section: Map<string, string> | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/^\uFEFF/, "");
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#") || trimmed.startsWith(";")) continue;
    const header = /^\[\s*([^\]]+?)\s*\]/.exec(trimmed);
    if (header) {
      section = out.get(header[1]) ?? new Map();
      out.set(header[1], section);
      continue;
    }
    // An indented line belongs to a nested block (s3 = ...); tierd reads no nested keys.
    if (/^\s/.test(line) || !section) continue;
    const eq = trimmed.indexOf("=");
    if (eq <= 0) continue;
    const key = trimmed.slice(0, eq).trim().toLowerCase();
    const value = trimmed.slice(eq + 1).replace(/\s[#;].*$/, "").trim();
    section.set(key, value);
  }
  return out;
}

/** Where the two shared files are. */
export interface SharedFilePaths {
  credentials: string;
  config: string;
}

/** The shared files' paths from the environment, else `~/.aws/credentials` and `~/.aws/config`. */
export function sharedFilePaths(env: Env): SharedFilePaths {
  const home = env("HOME") ?? env("USERPROFILE") ?? "/";
  const expand = (p: string) => (p.startsWith("~/") ? join(home, p.slice(2)) : p);
  return {
    credentials: expand(env("AWS_SHARED_CREDENTIALS_FILE") ?? join(home, ".aws", "credentials")),
    config: expand(env("AWS_CONFIG_FILE") ?? join(home, ".aws", "config")),
  };
}

/** The file's sections, or undefined when it does not exist. Other read errors are thrown. */
export async function readIni(path: string): Promise<IniFile | undefined> {
  try {
    return parseIni(await readFile(path, "utf8"));
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * The merged settings of `profile`: the credentials file's `[name]` over the config file's
 * `[profile name]` (`[default]` for the default profile).
 */
export function profileSettings(
  profile: string,
  files: { credentials?: IniFile; config?: IniFile },
): Map<string, string> | undefined {
  const fromConfig = files.config?.get(profile === "default" ? "default" : `profile ${profile}`) ??
    (profile === "default" ? files.config?.get("profile default") : undefined);
  const fromCredentials = files.credentials?.get(profile);
  if (!fromConfig && !fromCredentials) return undefined;
  return new Map([...(fromConfig ?? []), ...(fromCredentials ?? [])]);
}
