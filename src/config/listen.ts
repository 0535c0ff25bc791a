// The HTTP listen address (`agent.listen`): "host:port", IPv6 hosts in brackets.
import { UnitError } from "./units.ts";

/** A parsed `host:port`. */
export interface ListenAddress {
  /** Host name or IP address, without brackets. */
  host: string;
  /** TCP port, 0–65535 (0 lets the OS pick one). */
  port: number;
}

/** What `parseListen` accepts, for error messages. */
export const LISTEN_EXPECTED = 'host:port, like "127.0.0.1:7070", "[::1]:7070" or "0.0.0.0:7070"';

/**
 * Splits a listen address into host and port.
 *
 * @param text e.g. `"127.0.0.1:7070"` or `"[::1]:7070"`
 * @returns the host (brackets removed) and port
 * @throws {UnitError} when the text is not host:port
 */
export function parseListen(text: string): ListenAddress {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new UnitError(text, LISTEN_EXPECTED);
  return { host: m[1] ?? m[2], port };
}
